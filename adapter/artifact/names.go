package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/tasklifecycle/lifecycle"
)

// maxNameLen bounds the repository, branch and directory names derived
// from projects and task identifiers.
const maxNameLen = 100

// repoNameRE matches the repository names repoName returns.
var repoNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)

// validRepoName reports whether s is a repository name this package could
// have made, which is also a safe directory name.
func validRepoName(s string) bool {
	return len(s) <= maxNameLen && repoNameRE.MatchString(s) && !strings.Contains(s, "..")
}

// slug maps s to the characters keep accepts, lower-cased unless keepCase,
// with every other run of characters replaced by one '-', and trims
// separators from both ends. The result is at most maxNameLen bytes.
func slug(s string, keepCase bool, keep func(r rune) bool) string {
	if !keepCase {
		s = strings.ToLower(s)
	}
	var b strings.Builder
	dash := false
	for _, r := range s {
		if keep(r) {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := b.String()
	if len(out) > maxNameLen {
		out = out[:maxNameLen]
	}
	return strings.Trim(out, "-._")
}

func alnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// repoName returns the repository of a project: its name in lower case,
// with characters other than letters, digits, '.', '_' and '-' replaced. A
// name with nothing left ("日本") is named after a hash of the project.
func repoName(project string) string {
	s := slug(project, false, func(r rune) bool { return alnum(r) || r == '.' || r == '_' || r == '-' })
	for strings.Contains(s, "..") {
		s = strings.ReplaceAll(s, "..", ".")
	}
	if s == "" {
		sum := sha256.Sum256([]byte(project))
		s = "project-" + hex.EncodeToString(sum[:6])
	}
	return s
}

// taskSlug returns the branch-name part of a task: its identifier in lower
// case with anything but letters, digits, '_' and '-' replaced, or its ID
// when the identifier leaves nothing.
func taskSlug(t lifecycle.Task) string {
	keep := func(r rune) bool { return alnum(r) || r == '_' || r == '-' }
	if s := slug(t.Identifier, false, keep); s != "" {
		return s
	}
	return slug(t.ID, false, keep)
}

// recordShard returns the directory of recordDir that holds the directory
// dir of a task's records: the first two hexadecimal digits of the
// SHA-256 of dir, so that recordDir has at most 256 entries and each of them about
// tasks/256, and a submission rewrites small trees however many tasks a
// repository has.
func recordShard(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:1])
}

// recordPath returns the path, from the root of the tree root, of the
// directory of the records of the task whose directory is dir:
// recordDir/<shard>/dir, or recordDir/dir where an older version of the
// package made that directory (dir not being a possible shard name).
func (r *repo) recordPath(root plumbing.Hash, dir string) ([]string, error) {
	sharded := []string{recordDir, recordShard(dir), dir}
	if len(dir) == 2 && strings.Trim(dir, "0123456789abcdef") == "" {
		return sharded, nil
	}
	at := root
	for _, name := range []string{recordDir, dir} {
		es, err := r.tree(at)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(es, func(e object.TreeEntry) bool { return e.Name == name && e.Mode == filemode.Dir })
		if i < 0 {
			return sharded, nil
		}
		at = es[i].Hash
	}
	return []string{recordDir, dir}, nil
}

// taskDir returns the directory, under recordDir, that holds a task's
// submission record: its identifier with its case kept, or its ID.
func taskDir(t lifecycle.Task) string {
	keep := func(r rune) bool { return alnum(r) || r == '_' || r == '-' }
	if s := slug(t.Identifier, true, keep); s != "" {
		return s
	}
	return slug(t.ID, true, keep)
}
