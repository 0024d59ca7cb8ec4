package artifact

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Several writers (of one Adapter or several, each with its own list of
// the spares) taking spare files at once never take the same one: each
// spare ends up at exactly one writer's path, and every writer gets a
// file until none is left.
func TestTakeSpareNeverTwice(t *testing.T) {
	t.Parallel()
	gitDir := t.TempDir()
	if err := fillSpares(gitDir); err != nil {
		t.Fatal(err)
	}
	const writers = 4
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		taken []string
		errs  []error
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &repo{gitDir: gitDir}
			for i := 0; ; i++ {
				path := filepath.Join(gitDir, fmt.Sprintf("taken-%d-%d", w, i))
				f, err := r.takeSpare(path)
				if err != nil || f == nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				_, err = f.WriteString(path)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				mu.Lock()
				taken = append(taken, path)
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(taken) != spareTarget {
		t.Errorf("%d spares taken, want %d", len(taken), spareTarget)
	}
	// Each file holds what its one taker wrote: no two takers wrote into
	// one file.
	for _, path := range taken {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != path {
			t.Errorf("%s holds %q", path, b)
		}
	}
	left, err := os.ReadDir(filepath.Join(gitDir, spareDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d spares left, want 0", len(left))
	}
	// The packer fills them up again.
	if err := fillSpares(gitDir); err != nil {
		t.Fatal(err)
	}
	if left, err = os.ReadDir(filepath.Join(gitDir, spareDir)); err != nil || len(left) != spareTarget {
		t.Errorf("after fillSpares: %d spares, %v; want %d", len(left), err, spareTarget)
	}
}

// A spare that cannot be moved where a writer wants it, for another
// reason than another writer's taking it, makes the writer stop taking
// spares, and the spare stays.
func TestTakeSpareThatCannotMove(t *testing.T) {
	t.Parallel()
	gitDir := t.TempDir()
	if err := fillSpares(gitDir); err != nil {
		t.Fatal(err)
	}
	// rename(2) of a file onto a directory fails with EISDIR.
	dst := filepath.Join(gitDir, "a-directory")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &repo{gitDir: gitDir}
	if f, err := r.takeSpare(dst); err == nil || f != nil {
		t.Fatalf("takeSpare onto a directory = %v, %v; want an error", f, err)
	}
	if f, err := r.takeSpare(filepath.Join(gitDir, "a-file")); err != nil || f != nil {
		t.Fatalf("takeSpare after a failure = %v, %v; want none", f, err)
	}
	if left, err := os.ReadDir(filepath.Join(gitDir, spareDir)); err != nil || len(left) != spareTarget {
		t.Errorf("%d spares, %v; want %d", len(left), err, spareTarget)
	}
}
