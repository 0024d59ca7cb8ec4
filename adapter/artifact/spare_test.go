package artifact_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// spares returns the names of the spare files of the git directory gitDir.
func spares(t *testing.T, gitDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(gitDir, "lifecycle-spare"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// The packer leaves spare files, which writers then take; git and a new
// Adapter see none of them as a pack or an object, and a pack written
// into a spare is read as any other.
func TestSpareFilesTakenByWritersIgnoredByReaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: 30})
	if err != nil {
		t.Fatal(err)
	}
	merged := shipTasks(t, a, 1, 10)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	repoDir := a.RepositoryDir("web")
	gitDir := filepath.Join(repoDir, ".git")
	before := spares(t, gitDir)
	if len(before) == 0 {
		t.Fatal("no spare files after packing")
	}
	for _, name := range before {
		fi, err := os.Stat(filepath.Join(gitDir, "lifecycle-spare", name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != 0 {
			t.Errorf("spare %s holds %d bytes, want 0", name, fi.Size())
		}
	}
	gitCLI(t, repoDir, "fsck", "--no-dangling", "--strict")
	if out := gitCLI(t, repoDir, "count-objects", "-v"); !strings.Contains(out, "garbage: 0") {
		t.Errorf("git count-objects -v:\n%s", out)
	}

	// A new Adapter, which does not pack, writes into spares: a
	// submission and its merge, two packs of two files each.
	b, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, pr := range merged {
		if got, err := b.PullRequest(t.Context(), pr.PullRequestRef); err != nil || got.State != lifecycle.PullRequestMerged {
			t.Fatalf("b reads %s: %+v, %v; want merged", pr.PullRequestRef, got, err)
		}
	}
	_, packsBefore, _ := countFiles(t, gitDir)
	pr := ensure(t, b, submission(task("web", "ENG-11"), "sub_11"))
	merge(t, b, pr)
	_, packsAfter, tmp := countFiles(t, gitDir)
	after := spares(t, gitDir)
	if took := len(before) - len(after); packsAfter <= packsBefore || took != 2*(packsAfter-packsBefore) {
		t.Errorf("packs %d -> %d, spares %d -> %d: want two spares taken per new pack", packsBefore, packsAfter, len(before), len(after))
	}
	if tmp != 0 {
		t.Errorf("%d temporary files, want 0", tmp)
	}
	gitCLI(t, repoDir, "fsck", "--no-dangling", "--strict")
	if head := strings.TrimSpace(gitCLI(t, repoDir, "rev-parse", "main^2")); head != pr.HeadSHA {
		t.Errorf("main^2 = %s, want %s", head, pr.HeadSHA)
	}
	c := newAdapter(t, dir)
	if got, err := c.PullRequest(t.Context(), pr.PullRequestRef); err != nil || got.State != lifecycle.PullRequestMerged {
		t.Errorf("c reads %s: %+v, %v; want merged", pr.PullRequestRef, got, err)
	}
}
