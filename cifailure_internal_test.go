package lifecycle

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// boundFailure keeps what fits the budget, in its order, cut on UTF-8
// boundaries, and says when it cut.
func TestBoundFailure(t *testing.T) {
	t.Parallel()
	note := func(msg string) CIAnnotation {
		return CIAnnotation{Path: "a.go", StartLine: 1, EndLine: 1, Level: AnnotationFailure, Message: msg}
	}
	for _, tc := range []struct {
		name      string
		in        CIFailure
		budget    int
		title     string
		summary   string
		excerpt   string
		notes     int
		truncated bool
	}{
		{"fits", CIFailure{Title: "t", Summary: "s", Excerpt: "e", Annotations: []CIAnnotation{note("m")}}, 100, "t", "s", "e", 1, false},
		{"excerpt keeps its end", CIFailure{Excerpt: "0123456789"}, 4, "", "", "6789", 0, true},
		{"summary at most half", CIFailure{Summary: strings.Repeat("s", 10), Excerpt: "xyz"}, 8, "", "ssss", "xyz", 0, true},
		{"title first", CIFailure{Title: "title", Summary: "summary"}, 6, "title", "s", "", 0, true},
		{"annotations whole, a quarter", CIFailure{Annotations: []CIAnnotation{note("12345"), note("67890")}, Excerpt: "e"}, 40, "", "", "e", 1, true},
		{"UTF-8 head", CIFailure{Title: "ééé"}, 5, "éé", "", "", 0, true},
		{"UTF-8 tail", CIFailure{Excerpt: "ééé"}, 5, "", "", "éé", 0, true},
		{"nothing left", CIFailure{Title: "t", Excerpt: "e"}, 0, "", "", "", 0, true},
		{"invalid bytes replaced", CIFailure{Excerpt: "a\xffb"}, 100, "", "", "a\uFFFDb", 0, false},
		{"kept truncated", CIFailure{Excerpt: "e", Truncated: true}, 100, "", "", "e", 0, true},
	} {
		got := boundFailure(tc.in, tc.budget)
		if got.Title != tc.title || got.Summary != tc.summary || got.Excerpt != tc.excerpt || len(got.Annotations) != tc.notes || got.Truncated != tc.truncated {
			t.Errorf("%s: boundFailure = %+v", tc.name, got)
		}
		if n := failureSize(&got); n > max(tc.budget, 0) && tc.budget < 100 {
			t.Errorf("%s: %d bytes kept, budget %d", tc.name, n, tc.budget)
		}
		if !utf8.ValidString(got.Title + got.Summary + got.Excerpt) {
			t.Errorf("%s: invalid UTF-8 kept", tc.name)
		}
		if got.Annotations == nil {
			t.Errorf("%s: nil annotations", tc.name)
		}
	}
}
