package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Spare files. Creating a file is most of the cost of writing a pack on
// some file systems, and grows as files are removed near it: ext4
// without a journal skips the inodes freed in the last half minute or so
// when it looks for a free one, and the packer frees many (the packs it
// merged away). So the packer, in the background, creates empty files
// ahead of need in a directory of the git directory, lifecycle-spare,
// and a writer takes one (see repo.createPackFile) instead of creating a
// file on its way. A spare is claimed by renaming it: of two writers
// (of one Adapter or of several) that pick the same spare, the rename of
// one fails, and it picks another. A writer that finds none creates a
// file, as it did before spares.
//
// Spares are not recycled packs: a pack the packer merged away is
// removed, not truncated and reused, since a reader may still have it
// open (another Adapter until it lists the packs again, or git, which
// maps packs into memory and would fault on a truncated one). The spare
// directory is outside objects/: git ignores what it does not know in
// the git directory, and neither git nor the Adapters list it as packs.
// A process killed at any point leaves at worst an empty spare or a
// writer's temporary file, which the next writer removes.

// spareDir is the directory, in a repository's git directory, of the
// spare files.
const spareDir = "lifecycle-spare"

// sparePrefix starts the name of a spare file.
const sparePrefix = "spare_"

// spareTarget is the number of spare files the packer keeps ready: a
// write takes two, and the packer runs about every 15 writes.
const spareTarget = 64

// fillSpares creates empty spare files in the git directory gitDir until
// it holds spareTarget of them.
func fillSpares(gitDir string) error {
	dir := filepath.Join(gitDir, spareDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("spare files: %w", err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), sparePrefix) {
			n++
		}
	}
	for ; n < spareTarget; n++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s%016x", sparePrefix, rand.Uint64())), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("spare files: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("spare files: %w", err)
		}
	}
	return nil
}

// takeSpare renames a spare file of r to path, which must not exist, and
// opens it for writing, emptied. It returns nil when there is no spare
// left. r.spares holds the names of the spares last listed; they are
// listed again when it is empty, at most once a call. After a spare
// could not be moved for another reason than another writer's taking it,
// r takes none.
func (r *repo) takeSpare(path string) (*os.File, error) {
	if r.noSpares {
		return nil, nil
	}
	dir := filepath.Join(r.gitDir, spareDir)
	listed := false
	for {
		if len(r.spares) == 0 {
			if listed {
				return nil, nil
			}
			listed = true
			entries, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("list spare files: %w", err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), sparePrefix) {
					r.spares = append(r.spares, e.Name())
				}
			}
			continue
		}
		name := r.spares[len(r.spares)-1]
		r.spares = r.spares[:len(r.spares)-1]
		// The rename is the claim: it fails when another writer took the
		// spare first.
		if err := os.Rename(filepath.Join(dir, name), path); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			// The spares cannot be moved to objects/pack (another file
			// system, say): this Adapter stops taking them.
			r.noSpares = true
			return nil, fmt.Errorf("take spare file %s: %w", name, err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("take spare file %s: %w", name, err)
		}
		return f, nil
	}
}
