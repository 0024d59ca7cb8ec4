package id

import "testing"

func TestNew(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	for range 1000 {
		s := New("tsk_")
		if len(s) != 4+Length || !Valid(s, "tsk_") {
			t.Fatalf("New(tsk_) = %q, want tsk_ and %d base62 characters", s, Length)
		}
		if seen[s] {
			t.Fatalf("New(tsk_) repeated %q", s)
		}
		seen[s] = true
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s, prefix string
		want      bool
	}{
		{"tsk_abc123", "tsk_", true},
		{"tsk_", "tsk_", false},
		{"tsk_ab-c", "tsk_", false},
		{"evt_abc", "tsk_", false},
		{"tsk_abc/", "tsk_", false},
		{"", "tsk_", false},
	}
	for _, tt := range tests {
		if got := Valid(tt.s, tt.prefix); got != tt.want {
			t.Errorf("Valid(%q, %q) = %v, want %v", tt.s, tt.prefix, got, tt.want)
		}
	}
}
