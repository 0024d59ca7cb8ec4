package artifact_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// countFiles returns the loose objects, packs and temporary files of a
// packer in the git directory gitDir.
func countFiles(t *testing.T, gitDir string) (loose, packs, tmp int) {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(gitDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if len(d.Name()) != 2 {
			continue
		}
		es, err := os.ReadDir(filepath.Join(gitDir, "objects", d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		loose += len(es)
	}
	es, err := os.ReadDir(filepath.Join(gitDir, "objects", "pack"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range es {
		switch {
		case strings.HasPrefix(e.Name(), "tmp_"):
			tmp++
		case strings.HasSuffix(e.Name(), ".pack"):
			packs++
		}
	}
	return loose, packs, tmp
}

// shipTasks submits and merges n tasks, from first on, keeping three pull
// requests open so that they fork from a base that has moved on.
func shipTasks(t *testing.T, a *artifact.Adapter, first, n int) []lifecycle.PullRequest {
	t.Helper()
	var open, merged []lifecycle.PullRequest
	for i := first; i < first+n; i++ {
		open = append(open, ensure(t, a, submission(task("web", fmt.Sprintf("ENG-%d", i)), fmt.Sprintf("sub_%d", i))))
		if len(open) > 3 || i == first+n-1 {
			for len(open) > 3 || (i == first+n-1 && len(open) > 0) {
				merge(t, a, open[0])
				merged = append(merged, open[0])
				open = open[1:]
			}
		}
	}
	return merged
}

func TestPackingKeepsObjectsPackedAndReadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const packAfter = 60
	a, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: packAfter})
	if err != nil {
		t.Fatal(err)
	}
	merged := shipTasks(t, a, 1, 60)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(a.RepositoryDir("web"), ".git")
	loose, packs, tmp := countFiles(t, gitDir)
	// About 17 objects per task in about 3 writes: 60 tasks make about
	// 1,000 objects in about 180 packs, merged every 60 objects: about
	// log2(1,000/5) merged packs and the few packs written since.
	if loose != 0 || packs == 0 || packs > 20 || tmp != 0 {
		t.Errorf("after 60 merges: %d loose objects, %d packs, %d temporary files; want 0, 1 to 20, 0", loose, packs, tmp)
	}
	gitCLI(t, a.RepositoryDir("web"), "fsck", "--no-dangling", "--strict")
	if n := strings.TrimSpace(gitCLI(t, a.RepositoryDir("web"), "rev-list", "--count", "--first-parent", "main")); n != "61" {
		t.Errorf("main has %s first-parent commits, want 61", n)
	}

	// Another Adapter reads every pull request from the packs and goes on.
	b := newAdapter(t, dir)
	for _, pr := range merged {
		got, err := b.PullRequest(t.Context(), pr.PullRequestRef)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != lifecycle.PullRequestMerged || got.HeadSHA != pr.HeadSHA {
			t.Fatalf("pull request %s: state %s at %s, want merged at %s", pr.PullRequestRef, got.State, got.HeadSHA, pr.HeadSHA)
		}
	}
	shipTasks(t, b, 61, 3)
	gitCLI(t, a.RepositoryDir("web"), "fsck", "--no-dangling", "--strict")
}

// A packer killed midway leaves temporary files and objects both loose and
// packed; the next one removes the first and the loose copies, and nothing
// is lost. The loose objects are those of a repository that an older
// version of the package (which wrote objects loose) or git wrote.
func TestPackingAfterAKilledPacker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	shipTasks(t, a, 1, 10)
	repoDir := a.RepositoryDir("web")
	gitDir := filepath.Join(repoDir, ".git")
	if loose, packs, tmp := countFiles(t, gitDir); loose != 0 || packs < 20 || tmp != 0 {
		t.Fatalf("10 tasks shipped with PackAfter -1 left %d loose objects, %d packs, %d temporary files; want 0, a pack per write, 0", loose, packs, tmp)
	}
	// Every object loose, as an older version left them.
	packDir := filepath.Join(gitDir, "objects", "pack")
	packs, err := filepath.Glob(filepath.Join(packDir, "pack-*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	aside := t.TempDir()
	for _, p := range packs {
		for _, ext := range []string{".pack", ".idx"} {
			name := strings.TrimSuffix(filepath.Base(p), ".pack") + ext
			if err := os.Rename(filepath.Join(packDir, name), filepath.Join(aside, name)); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Open(filepath.Join(aside, filepath.Base(p)))
		if err != nil {
			t.Fatal(err)
		}
		gitStdinOut(t, repoDir, f, "unpack-objects", "-q")
		f.Close()
	}
	// A pack of some of the loose objects, left with its loose copies, as
	// by a packer killed before it removed them; and a half-written pack.
	gitCLI(t, repoDir, "repack", "-q")
	if err := os.WriteFile(filepath.Join(packDir, "tmp_lifecycle_pack_123"), []byte("PACK\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	looseBefore, _, _ := countFiles(t, gitDir)

	b, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	shipTasks(t, b, 11, 2)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	loose, npacks, tmp := countFiles(t, gitDir)
	if loose >= looseBefore || npacks == 0 || tmp != 0 {
		t.Errorf("after packing: %d loose objects (before: %d), %d packs, %d temporary files", loose, looseBefore, npacks, tmp)
	}
	gitCLI(t, repoDir, "fsck", "--no-dangling", "--strict")
	if n := strings.TrimSpace(gitCLI(t, repoDir, "rev-list", "--count", "--first-parent", "main")); n != "13" {
		t.Errorf("main has %s first-parent commits, want 13", n)
	}
}

// A task whose records an older version of the package wrote in
// .lifecycle/<task>/, before they were sharded, keeps them there.
func TestRecordsStayWhereAnOlderVersionPutThem(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	ensure(t, a, submission(task("web", "ENG-1"), "sub_1")) // creates the repository
	r := openRepo(t, a, "web")
	mainRef := plumbing.NewBranchReferenceName("main")
	tip, err := r.Reference(mainRef, false)
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.CommitObject(tip.Hash())
	if err != nil {
		t.Fatal(err)
	}
	baseTree, err := base.Tree()
	if err != nil {
		t.Fatal(err)
	}
	// main:.lifecycle/ENG-9/submission.json, as an older version merged it.
	blob, err := store(r.Storer, plumbing.BlobObject, func(o plumbing.EncodedObject) error {
		w, err := o.Writer()
		if err != nil {
			return err
		}
		fmt.Fprintln(w, `{"submissionId": "sub_old"}`)
		return w.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	tree := func(es ...object.TreeEntry) plumbing.Hash {
		slices.SortFunc(es, func(x, y object.TreeEntry) int { return strings.Compare(treeKey(x), treeKey(y)) })
		h, err := store(r.Storer, plumbing.TreeObject, (&object.Tree{Entries: es}).Encode)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	task9 := tree(object.TreeEntry{Name: "submission.json", Mode: filemode.Regular, Hash: blob})
	records := tree(object.TreeEntry{Name: "ENG-9", Mode: filemode.Dir, Hash: task9})
	root := tree(append(slices.Clone(baseTree.Entries), object.TreeEntry{Name: ".lifecycle", Mode: filemode.Dir, Hash: records})...)
	sig := object.Signature{Name: "lifecycle", Email: "lifecycle@localhost", When: epoch}
	c := &object.Commit{Author: sig, Committer: sig, Message: "Merge as an older version did\n", TreeHash: root, ParentHashes: []plumbing.Hash{tip.Hash()}}
	h, err := store(r.Storer, plumbing.CommitObject, c.Encode)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Storer.CheckAndSetReference(plumbing.NewHashReference(mainRef, h), tip); err != nil {
		t.Fatal(err)
	}

	pr := ensure(t, a, submission(task("web", "ENG-9"), "sub_new"))
	// go-git keeps the list of packs it read, and the Adapter's writes
	// are new packs: open the repository again.
	r = openRepo(t, a, "web")
	if got := fileAt(t, r, pr.HeadSHA, ".lifecycle/ENG-9/submission.json"); !strings.Contains(got, `"submissionId": "sub_new"`) {
		t.Errorf(".lifecycle/ENG-9/submission.json = %s, want submission sub_new", got)
	}
	headCommit, err := r.CommitObject(plumbing.NewHash(pr.HeadSHA))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := headCommit.File(record("ENG-9", "submission.json")); err == nil {
		t.Errorf("%s written too", record("ENG-9", "submission.json"))
	}
	merge(t, a, pr)
}
