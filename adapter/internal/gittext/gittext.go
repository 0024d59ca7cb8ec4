// Package gittext checks and cleans what adapters hand to git: branch
// names, commit messages and the identity of a commit's author. The
// lifecycle's HTTP API refuses control characters and bad branch names
// before they reach an adapter, but callers of the Go API reach adapters
// directly, and a queue names branches of its own.
package gittext

import (
	"strings"
	"unicode"

	"github.com/go-git/go-git/v5/plumbing"
)

// maxBranch is the longest branch name taken, in bytes.
const maxBranch = 200

// Branch checks a branch name and returns it without a "refs/heads/"
// prefix: false when git would not take it as refs/heads/<name> (git
// check-ref-format's rules), when it could pass for a command-line
// option, or when it is longer than 200 bytes.
func Branch(s string) (string, bool) {
	s = strings.TrimPrefix(s, "refs/heads/")
	if s == "" || len(s) > maxBranch || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "/") {
		return "", false
	}
	if plumbing.NewBranchReferenceName(s).Validate() != nil {
		return "", false
	}
	return s, true
}

// Text returns s fit for a commit message: valid UTF-8 (invalid bytes
// become U+FFFD), without NUL or other control characters but tab and
// newline. git fsck refuses a NUL in a commit, and C git ends the message
// there.
func Text(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// OneLine returns s as Text does, with runs of white space, line breaks
// included, made one space: for commit subjects and trailers.
func OneLine(s string) string {
	return strings.Join(strings.Fields(Text(s)), " ")
}

// Ident reports whether name and email may stand in a commit's author
// or committer line: valid UTF-8 without control characters, '<' or
// '>'.
func Ident(name, email string) bool {
	return Text(name) == name && Text(email) == email && !strings.ContainsAny(name+email, "<>\n")
}
