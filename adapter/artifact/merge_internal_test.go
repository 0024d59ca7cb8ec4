package artifact

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// runGit runs git in dir and returns its standard output.
func runGit(t *testing.T, dir string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mergePacks merges packs that git made, with deltas and with objects in
// several packs, into one pack that holds each object once and that git
// reads whole.
func TestMergePacksOfGit(t *testing.T) {
	t.Parallel()
	repoDir := t.TempDir()
	runGit(t, repoDir, "", "init", "-q")
	// Similar files, so that git stores most of them as deltas.
	var base strings.Builder
	for i := range 400 {
		fmt.Fprintf(&base, "line %d of a file that changes little between versions\n", i)
	}
	for i := range 12 {
		if err := os.WriteFile(filepath.Join(repoDir, fmt.Sprintf("f%d.txt", i)), []byte(base.String()+fmt.Sprintf("version %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, repoDir, "", "add", ".")
	runGit(t, repoDir, "", "commit", "-q", "-m", "one")
	runGit(t, repoDir, "", "repack", "-a", "-d", "-f", "-q")
	gitDir := filepath.Join(repoDir, ".git")
	packDir := filepath.Join(gitDir, "objects", "pack")
	// A second commit, and a second pack of every object without deltas,
	// bigger than the first: the entries of the first, deltas, come first
	// in the merged pack, and their copies in the second are skipped.
	if err := os.WriteFile(filepath.Join(repoDir, "f0.txt"), []byte("replaced\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, repoDir, "", "commit", "-q", "-a", "-m", "two")
	want := strings.Fields(runGit(t, repoDir, "", "rev-list", "--objects", "--all", "--no-object-names"))
	runGit(t, repoDir, strings.Join(want, "\n")+"\n", "pack-objects", "-q", "--no-reuse-delta", "--depth=0", filepath.Join(packDir, "pack"))
	runGit(t, repoDir, "", "prune-packed")
	before, _ := filepath.Glob(filepath.Join(packDir, "*.pack"))
	if len(before) != 2 {
		t.Fatalf("%d packs before merging, want 2", len(before))
	}
	if v := runGit(t, repoDir, "", "verify-pack", "-v", strings.TrimSuffix(before[0], ".pack")+".idx", strings.TrimSuffix(before[1], ".pack")+".idx"); !strings.Contains(v, "chain length") {
		t.Fatalf("git made no deltas:\n%s", v)
	}

	st := filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRU(cache.MiByte), filesystem.Options{KeepDescriptors: true})
	defer st.Close()
	changed := false
	remove := func(bases []string) error {
		for _, b := range bases {
			for _, ext := range []string{".pack", ".idx"} {
				if err := os.Remove(b + ext); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := mergePacks(st, packDir, func(c bool) { changed = c }, remove); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(packDir, "*.idx"))
	if !changed || len(after) != 1 {
		t.Fatalf("after merging: changed %v, %d packs; want true, 1", changed, len(after))
	}
	n, err := idxCount(after[0])
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("the merged pack holds %d objects, want %d", n, len(want))
	}
	runGit(t, repoDir, "", "verify-pack", after[0])
	runGit(t, repoDir, "", "fsck", "--strict", "--no-dangling")
	if got := runGit(t, repoDir, "", "show", "HEAD~1:f3.txt"); got != base.String()+"version 3\n" {
		t.Errorf("f3.txt at HEAD~1 reads %d bytes", len(got))
	}
}
