package artifact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Text from a caller of the Go API (which the HTTP layer's checks do not
// cover) never puts a NUL, another control character or invalid UTF-8
// into a git object: git fsck --strict accepts every commit, and C git
// reads whole messages.
func TestControlCharactersNeverReachGitObjects(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "NUL-1")
	tk.Title = "Fix\x00 the\x1b[31m redirect\xff"
	req := submission(tk, "sub_nul")
	req.Summary = "Done\x00 truncated here?\r\nsecond\x7f line\x85 \xc3"
	pr := ensure(t, a, req)
	res := merge(t, a, pr)

	r := openRepo(t, a, "web")
	for _, sha := range []string{pr.HeadSHA, res.MergeCommitSHA} {
		c, err := r.CommitObject(plumbing.NewHash(sha))
		if err != nil {
			t.Fatal(err)
		}
		checkGitText(t, c)
	}
	iter, err := r.CommitObjects()
	if err != nil {
		t.Fatal(err)
	}
	iter.ForEach(func(c *object.Commit) error { checkGitText(t, c); return nil })
	gitCLI(t, a.RepositoryDir("web"), "fsck", "--strict", "--no-dangling")
}

func checkGitText(t *testing.T, c *object.Commit) {
	t.Helper()
	if i := strings.IndexFunc(c.Message, func(r rune) bool {
		return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
	}); i >= 0 {
		t.Errorf("commit %s has a control character at %d: %q", c.Hash, i, c.Message)
	}
	if !utf8.ValidString(c.Message) {
		t.Errorf("commit %s has invalid UTF-8: %q", c.Hash, c.Message)
	}
	if len(c.ParentHashes) > 0 && !strings.Contains(c.Message, "Lifecycle-") {
		t.Errorf("commit %s lost its trailers: %q", c.Hash, c.Message)
	}
}
