package artifact_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// A writer killed between renaming a new pack's index and renaming the
// pack leaves an index without its pack; one killed before either rename
// leaves temporary files. Neither hides an object from go-git, git or a
// new Adapter, and the next write removes the temporary files.
func TestWriterKilledBetweenIndexAndPack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	merged := shipTasks(t, a, 1, 4)
	open := ensure(t, a, submission(task("web", "ENG-5"), "sub_5"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	repoDir := a.RepositoryDir("web")
	packDir := filepath.Join(repoDir, ".git", "objects", "pack")

	// A real pack of an object that no ref names, made by git in another
	// repository: its index renamed into place, the pack still under its
	// temporary name, as a writer killed between the two renames leaves
	// them.
	scratch := t.TempDir()
	gitCLI(t, scratch, "init", "-q")
	blob := strings.TrimSpace(gitStdinOut(t, scratch, strings.NewReader("never referenced\n"), "hash-object", "-w", "--stdin"))
	sum := strings.TrimSpace(gitStdinOut(t, scratch, strings.NewReader(blob+"\n"), "pack-objects", "-q", filepath.Join(scratch, "out")))
	copyFile(t, filepath.Join(scratch, "out-"+sum+".idx"), filepath.Join(packDir, "pack-"+sum+".idx"))
	copyFile(t, filepath.Join(scratch, "out-"+sum+".pack"), filepath.Join(packDir, "tmp_lifecycle_write_0123456789abcdef.pack"))
	// And a writer killed while it wrote a pack.
	if err := os.WriteFile(filepath.Join(packDir, "tmp_lifecycle_write_fedcba9876543210.pack"), []byte("PACK\x00\x00"), 0o444); err != nil {
		t.Fatal(err)
	}

	gitCLI(t, repoDir, "fsck", "--no-dangling", "--strict")
	b := newAdapter(t, dir)
	for _, pr := range append(merged, open) {
		got, err := b.PullRequest(t.Context(), pr.PullRequestRef)
		if err != nil {
			t.Fatal(err)
		}
		if got.HeadSHA != pr.HeadSHA {
			t.Fatalf("pull request %s at %s, want %s", pr.PullRequestRef, got.HeadSHA, pr.HeadSHA)
		}
	}
	merge(t, b, open)
	shipTasks(t, b, 6, 2)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, tmp := countFiles(t, filepath.Join(repoDir, ".git")); tmp != 0 {
		t.Errorf("after the next writes: %d temporary files, want 0", tmp)
	}
	gitCLI(t, repoDir, "fsck", "--no-dangling", "--strict")
	if n := strings.TrimSpace(gitCLI(t, repoDir, "rev-list", "--count", "--first-parent", "main")); n != "8" {
		t.Errorf("main has %s first-parent commits, want 8", n)
	}
	// go-git, as a program reading the repository would.
	r := openRepo(t, b, "web")
	mainSHA := strings.TrimSpace(gitCLI(t, repoDir, "rev-parse", "main"))
	for i := 1; i <= 7; i++ {
		if got := fileAt(t, r, mainSHA, record(fmt.Sprintf("ENG-%d", i), "submission.json")); !strings.Contains(got, fmt.Sprintf(`"submissionId": "sub_%d"`, i)) {
			t.Errorf("main:%s = %s", record(fmt.Sprintf("ENG-%d", i), "submission.json"), got)
		}
	}
}

// The small packs an Adapter writes are read by another Adapter on the
// same directory, opened before or after they were written, and by git.
func TestPacksReadByAnotherAdapter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	pr := ensure(t, a, submission(task("web", "ENG-1"), "sub_1"))
	// b lists the packs now; a's next writes are packs it has not seen.
	b := newAdapter(t, dir)
	if got, err := b.PullRequest(t.Context(), pr.PullRequestRef); err != nil || got.HeadSHA != pr.HeadSHA {
		t.Fatalf("b reads %s: %+v, %v; want head %s", pr.PullRequestRef, got, err, pr.HeadSHA)
	}
	pr2 := ensure(t, a, submission(task("web", "ENG-1"), "sub_2"))
	res := merge(t, a, pr2)
	got, err := b.PullRequest(t.Context(), pr.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.PullRequestMerged || got.HeadSHA != pr2.HeadSHA {
		t.Errorf("b reads %s: %s at %s, want merged at %s", pr.PullRequestRef, got.State, got.HeadSHA, pr2.HeadSHA)
	}
	// And b writes on top of what a wrote, which a reads.
	pr3 := ensure(t, b, submission(task("web", "ENG-2"), "sub_3"))
	merge(t, b, pr3)
	if got, err := a.PullRequest(t.Context(), pr3.PullRequestRef); err != nil || got.State != lifecycle.PullRequestMerged {
		t.Errorf("a reads %s: %+v, %v; want merged", pr3.PullRequestRef, got, err)
	}
	// A third, new Adapter.
	c := newAdapter(t, dir)
	for _, p := range []lifecycle.PullRequest{pr, pr3} {
		if got, err := c.PullRequest(t.Context(), p.PullRequestRef); err != nil || got.State != lifecycle.PullRequestMerged {
			t.Errorf("c reads %s: %+v, %v; want merged", p.PullRequestRef, got, err)
		}
	}
	repoDir := a.RepositoryDir("web")
	if loose, _, _ := countFiles(t, filepath.Join(repoDir, ".git")); loose != 0 {
		t.Errorf("%d loose objects, want 0", loose)
	}
	gitCLI(t, repoDir, "fsck", "--no-dangling", "--strict")
	if head := strings.TrimSpace(gitCLI(t, repoDir, "rev-parse", "main^2")); head != pr3.HeadSHA {
		t.Errorf("main^2 = %s, want %s (merge %s)", head, pr3.HeadSHA, res.MergeCommitSHA)
	}
}

// Adapters on one directory write to one repository from several
// goroutines while their packers merge the packs: nothing is lost.
func TestConcurrentWritesAndPacking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var adapters []*artifact.Adapter
	for range 2 {
		// A packer after every write or two.
		a, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }, PackAfter: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		adapters = append(adapters, a)
	}
	const workers, tasks = 4, 6
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		merged []lifecycle.PullRequest
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := adapters[w%len(adapters)]
			for i := range tasks {
				tk := task("web", fmt.Sprintf("ENG-%d", w*tasks+i+1))
				pr, err := a.EnsurePullRequest(context.Background(), submission(tk, fmt.Sprintf("sub_%d_%d", w, i)))
				if err != nil {
					t.Errorf("EnsurePullRequest: %v", err)
					return
				}
				if _, err := a.Merge(context.Background(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); err != nil {
					t.Errorf("Merge %s: %v", pr.PullRequestRef, err)
					return
				}
				mu.Lock()
				merged = append(merged, pr)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, a := range adapters {
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(merged) != workers*tasks {
		t.Fatalf("%d merges, want %d", len(merged), workers*tasks)
	}
	repoDir := adapters[0].RepositoryDir("web")
	loose, packs, tmp := countFiles(t, filepath.Join(repoDir, ".git"))
	if loose != 0 || packs > 20 || tmp != 0 {
		t.Errorf("%d loose objects, %d packs, %d temporary files; want 0, at most 20, 0", loose, packs, tmp)
	}
	gitCLI(t, repoDir, "fsck", "--no-dangling", "--strict")
	if n := strings.TrimSpace(gitCLI(t, repoDir, "rev-list", "--count", "--first-parent", "main")); n != fmt.Sprint(workers*tasks+1) {
		t.Errorf("main has %s first-parent commits, want %d", n, workers*tasks+1)
	}
	c := newAdapter(t, dir)
	for _, pr := range merged {
		got, err := c.PullRequest(t.Context(), pr.PullRequestRef)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != lifecycle.PullRequestMerged || got.HeadSHA != pr.HeadSHA {
			t.Errorf("%s: %s at %s, want merged at %s", pr.PullRequestRef, got.State, got.HeadSHA, pr.HeadSHA)
		}
	}
}

// copyFile copies the file from to the new file to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o444); err != nil {
		t.Fatal(err)
	}
}
