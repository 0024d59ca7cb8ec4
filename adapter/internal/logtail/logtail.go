// Package logtail keeps the end of a CI log: the part that says why a job
// failed. The GitHub and GitLab adapters cut what they serve with it.
package logtail

import "unicode/utf8"

// Cut returns the last n bytes of s, beginning on a UTF-8 boundary, and
// whether it cut any. With n not positive it returns all of s.
func Cut(s string, n int) (string, bool) {
	if n <= 0 || len(s) <= n {
		return s, false
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:], true
}
