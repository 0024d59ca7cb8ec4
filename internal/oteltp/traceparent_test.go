package oteltp

import "testing"

func TestTraceID(t *testing.T) {
	t.Parallel()
	const trace, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	tests := []struct {
		value, want string
	}{
		{"00-" + trace + "-" + parent + "-01", trace},
		{" 00-" + trace + "-" + parent + "-00 ", trace},
		{"01-" + trace + "-" + parent + "-01-more", trace}, // a later version may carry more
		{"00-" + trace + "-" + parent + "-01-more", ""},    // version 00 may not
		{"ff-" + trace + "-" + parent + "-01", ""},
		{"00-" + "0AF7651916CD43DD8448EB211C80319C" + "-" + parent + "-01", ""}, // upper case
		{"00-00000000000000000000000000000000-" + parent + "-01", ""},
		{"00-" + trace + "-0000000000000000-01", ""},
		{"00-" + trace + "-" + parent, ""},
		{"", ""},
		{"00_" + trace + "-" + parent + "-01", ""},
	}
	for _, tt := range tests {
		if got := TraceID(tt.value); got != tt.want {
			t.Errorf("TraceID(%q) = %q, want %q", tt.value, got, tt.want)
		}
	}
}
