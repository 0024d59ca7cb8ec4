package gittext

import "testing"

func TestBranch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"main", "main", true},
		{"refs/heads/lifecycle-queue/main/3", "lifecycle-queue/main/3", true},
		{"feature/x.y", "feature/x.y", true},
		{"", "", false},
		{"-main", "", false},
		{"main/", "", false},
		{"/main", "", false},
		{"a..b", "", false},
		{"a//b", "", false},
		{"a.lock", "", false},
		{"a/.b", "", false},
		{"a.", "", false},
		{"a@{b", "", false},
		{"@", "", false},
		{"a b", "", false},
		{"a~b", "", false},
		{"a^b", "", false},
		{"a:b", "", false},
		{"a?b", "", false},
		{"a*b", "", false},
		{"a[b", "", false},
		{"a\\b", "", false},
		{"a\x7fb", "", false},
		{"a\x01b", "", false},
		{string(make([]byte, 201)), "", false},
	} {
		got, ok := Branch(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Branch(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, text, line string }{
		{"Fix the login", "Fix the login", "Fix the login"},
		{"a\x00b\x1bc", "abc", "abc"},
		{"two\nlines\tand  tabs", "two\nlines\tand  tabs", "two lines and tabs"},
		{"bad \xff byte", "bad \uFFFD byte", "bad \uFFFD byte"},
		{"  padded\r\n", "  padded\n", "padded"},
	} {
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := OneLine(tc.in); got != tc.line {
			t.Errorf("OneLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
	}
}

func TestIdent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, email string
		ok          bool
	}{
		{"lifecycle", "lifecycle@localhost", true},
		{"Zoë Agent", "zoe@example.com", true},
		{"a<b", "x@y", false},
		{"ab", "x>y", false},
		{"two\nlines", "x@y", false},
		{"tab\tbed", "x@y", true},
		{"nul\x00", "x@y", false},
		{"ab", "bad\xff", false},
	} {
		if got := Ident(tc.name, tc.email); got != tc.ok {
			t.Errorf("Ident(%q, %q) = %v, want %v", tc.name, tc.email, got, tc.ok)
		}
	}
}
