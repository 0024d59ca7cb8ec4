package artifact

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestPackSetAgreesWithGit: the Adapter's own pack reader (packSet, which
// stands in for go-git's object storage) reads every object of packs git
// made, of random sizes and contents and spread over several packs, as
// git does; an entry git stored as a delta is errDelta, and an object no
// pack holds is ErrObjectNotFound.
func TestPackSetAgreesWithGit(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rnd := rand.New(rand.NewPCG(seed, 30))
			repoDir := t.TempDir()
			runGit(t, repoDir, "", "init", "-q")
			gitDir := filepath.Join(repoDir, ".git")
			packDir := filepath.Join(gitDir, "objects", "pack")
			// Several packs, each of random blobs: empty, small, and larger
			// than zlib's window, random bytes and repetitive text.
			var hashes []string
			for range 1 + rnd.IntN(4) {
				var names []string
				for range 1 + rnd.IntN(30) {
					size := []int{0, 1 + rnd.IntN(100), rnd.IntN(200 << 10)}[rnd.IntN(3)]
					body := make([]byte, size)
					if rnd.IntN(2) == 0 {
						for i := range body {
							body[i] = byte(rnd.UintN(256))
						}
					} else {
						copy(body, bytes.Repeat([]byte("a line of text that repeats\n"), size/28+1))
					}
					f := filepath.Join(repoDir, fmt.Sprintf("blob-%d", rnd.Uint64()))
					if err := os.WriteFile(f, body, 0o644); err != nil {
						t.Fatal(err)
					}
					names = append(names, strings.TrimSpace(runGit(t, repoDir, "", "hash-object", "-w", f)))
				}
				// Deltas are allowed: similar blobs may be stored as such.
				runGit(t, repoDir, strings.Join(names, "\n")+"\n", "pack-objects", "-q", filepath.Join(packDir, "pack"))
				hashes = append(hashes, names...)
			}
			ps := &packSet{dir: packDir}
			if err := ps.refresh(); err != nil {
				t.Fatal(err)
			}
			deltas := map[string]bool{}
			for _, line := range strings.Split(runGit(t, repoDir, "", append([]string{"verify-pack"}, packFiles(t, packDir)...)...), "\n") {
				// "<hash> <type> <size> <size in pack> <offset> <depth> <base>" marks a delta.
				if f := strings.Fields(line); len(f) == 7 && len(f[0]) == 40 {
					deltas[f[0]] = true
				}
			}
			compared := 0
			for _, h := range hashes {
				o, err := ps.get(plumbing.NewHash(h))
				if deltas[h] {
					if !errors.Is(err, errDelta) {
						t.Errorf("%s, a delta in its pack: %v, want errDelta", h, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", h, err)
				}
				r, err := o.Reader()
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(r)
				if err != nil {
					t.Fatal(err)
				}
				want := runGit(t, repoDir, "", "cat-file", "blob", h)
				if o.Type() != plumbing.BlobObject || o.Hash().String() != h || string(got) != want {
					t.Errorf("%s: read a %s of %d bytes (hash %s), git reads a blob of %d", h, o.Type(), len(got), o.Hash(), len(want))
				}
				compared++
			}
			if compared == 0 {
				t.Fatal("every object was a delta: nothing read was compared")
			}
			var missing plumbing.Hash
			for i := range missing {
				missing[i] = byte(rnd.UintN(256))
			}
			if _, err := ps.get(missing); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Errorf("an object no pack holds: %v, want ErrObjectNotFound", err)
			}
		})
	}
}

// packFiles returns the .idx files in dir, for git verify-pack.
func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	idx, err := filepath.Glob(filepath.Join(dir, "pack-*.idx"))
	if err != nil || len(idx) == 0 {
		t.Fatalf("no pack in %s: %v", dir, err)
	}
	return append([]string{"-v"}, idx...)
}
