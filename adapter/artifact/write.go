package artifact

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Writing objects. An operation's new objects (a submission's blobs,
// trees and commit; a merge's trees and commit) are kept in memory
// (repo.store) until a ref is about to name them or the operation ends;
// flush then writes them as one small pack into objects/pack: the pack
// and its index are written into temporary files, and renamed into place
// index first, pack second. go-git lists the packs of a repository by
// their .pack files (dotgit.DotGit.ObjectPacks) and then opens each
// one's .idx, failing when it is missing; git lists them by their .idx
// files and skips one whose .pack is missing. So a pack is visible to
// either only once both files are complete, and a process killed between
// the two renames leaves an index that both ignore and that is harmless.
// Refs are written after the pack (see setRef), so a ref never names an
// object that is not in a pack. No loose object is written: a loose
// object costs a file creation in one of 256 directories, which was most
// of an operation's cost and grew with the objects that had passed
// through those directories (BENCHMARKS.md). The packer (pack.go) merges
// the small packs geometrically, as it did the packs of loose objects.
//
// Writers write while they hold the repository's file lock, so the
// temporary files of a writer killed midway, which start with
// writeTmpPrefix, are removed by the next writer of the repository.
// The packer leaves them alone, and writers leave the packer's alone.
//
// go-git's object storage reads the list of packs once and keeps it
// until it is told to read it again (ObjectStorage.Reindex); reading it
// again reads every index, whose size grows with the repository. So the
// objects of the packs this Adapter wrote stay in memory (repo.mem) until
// the list is read again, which happens after the packer changed the
// packs (every Config.PackAfter objects) or when an object is not where
// the list says (see getObject).

// writeTmpPrefix starts the temporary files of a writer in objects/pack.
const writeTmpPrefix = "tmp_lifecycle_write_"

// maxMemObjects bounds repo.mem: when a flush leaves more objects in it,
// the list of packs is read again, which empties it.
const maxMemObjects = 8192

// memStorer is the object storage of a repository as this Adapter sees
// it: the objects of r.mem, then those of r.packs, then those of go-git's
// storage (loose objects, deltas).
type memStorer struct {
	*filesystem.Storage
	r *repo
}

// EncodedObject returns the object h, of type t unless t is
// plumbing.AnyObject.
func (s memStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if o, ok := s.r.mem[h]; ok {
		if t != plumbing.AnyObject && o.Type() != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return o, nil
	}
	o, err := s.r.packs.get(h)
	if err == nil {
		if t != plumbing.AnyObject && o.Type() != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return o, nil
	}
	if !errors.Is(err, plumbing.ErrObjectNotFound) && !errors.Is(err, errDelta) {
		return nil, err
	}
	return s.Storage.EncodedObject(t, h)
}

// HasEncodedObject reports plumbing.ErrObjectNotFound when there is no
// object h.
func (s memStorer) HasEncodedObject(h plumbing.Hash) error {
	if _, ok := s.r.mem[h]; ok {
		return nil
	}
	for _, p := range s.r.packs.packs {
		if ok, _ := p.idx.Contains(h); ok {
			return nil
		}
	}
	return s.Storage.HasEncodedObject(h)
}

// EncodedObjectSize returns the size of the content of object h.
func (s memStorer) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	o, err := s.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return 0, err
	}
	return o.Size(), nil
}

// packsLockFile is the file, in a repository's git directory, whose
// flock(2) packers hold while they remove packs and Adapters hold while
// go-git reads the list of packs and their indexes: go-git fails when a
// pack it listed is gone before it read its index.
const packsLockFile = "lifecycle-packs.lock"

// lockGitFile takes the flock(2) of the file name in the git directory
// gitDir, creating it, and returns the function that releases it.
func lockGitFile(gitDir, name string) (unlock func(), err error) {
	f, err := osfs.New(gitDir).OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if err := f.Lock(); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}

// reindex reads the list of packs again (r.packs now, r.st when it next
// looks for an object), and forgets the objects of r.mem that are found
// there: all but those of r.batch, which are not written yet.
func (r *repo) reindex() {
	r.st.Reindex()
	if unlock, err := lockGitFile(r.gitDir, packsLockFile); err == nil {
		err = r.packs.refresh()
		unlock()
		if err != nil && r.logger != nil {
			r.logger.Warn("artifact: list packs", "repo", r.name, "err", err)
		}
	}
	if len(r.mem) == len(r.batch) {
		return
	}
	keep := make([]*plumbing.MemoryObject, len(r.batch))
	for i, h := range r.batch {
		keep[i] = r.mem[h]
	}
	clear(r.mem)
	for i, h := range r.batch {
		r.mem[h] = keep[i]
	}
}

// flush writes the objects of r.batch as one pack; see the comment at the
// top of this file. The caller holds the repository's file lock (or is
// creating the repository).
func (r *repo) flush() error {
	if len(r.batch) == 0 {
		return nil
	}
	packDir := filepath.Join(r.gitDir, "objects", "pack")
	if !r.cleaned {
		if err := os.MkdirAll(packDir, 0o755); err != nil {
			return fmt.Errorf("write %d objects: %w", len(r.batch), err)
		}
		if old, err := filepath.Glob(filepath.Join(packDir, writeTmpPrefix+"*")); err == nil {
			for _, o := range old {
				os.Remove(o)
			}
		}
		r.cleaned = true
	}
	pack, idx, sum, err := r.encodePack()
	if err != nil {
		return fmt.Errorf("write %d objects: %w", len(r.batch), err)
	}
	base := filepath.Join(packDir, "pack-"+sum.String())
	tmp := filepath.Join(packDir, fmt.Sprintf("%s%016x", writeTmpPrefix, rand.Uint64()))
	if err := r.writeNewFile(tmp+".pack", pack); err != nil {
		return fmt.Errorf("write %d objects: %w", len(r.batch), err)
	}
	if err := r.writeNewFile(tmp+".idx", idx); err != nil {
		os.Remove(tmp + ".pack")
		return fmt.Errorf("write %d objects: %w", len(r.batch), err)
	}
	// The index first: see the comment at the top of this file.
	err = os.Rename(tmp+".idx", base+".idx")
	if err == nil {
		err = os.Rename(tmp+".pack", base+".pack")
	}
	if err != nil {
		os.Remove(tmp + ".idx")
		os.Remove(tmp + ".pack")
		return fmt.Errorf("write %d objects: %w", len(r.batch), err)
	}
	r.written.Add(int64(len(r.batch)))
	r.batch = r.batch[:0]
	if len(r.mem) > maxMemObjects {
		r.reindex()
	}
	return nil
}

// writeNewFile writes data into the new file path, read-only as git
// leaves packs: a spare file (see spare.go) when there is one, a file it
// creates otherwise.
func (r *repo) writeNewFile(path string, data []byte) error {
	f, err := r.takeSpare(path)
	if err != nil && r.logger != nil {
		r.logger.Warn("artifact: take a spare file", "repo", r.name, "err", err)
	}
	if f == nil {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if errors.Is(err, fs.ErrNotExist) {
			// objects/pack went away (removed by hand, say).
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		}
		if err != nil {
			return err
		}
	} else {
		err = f.Chmod(0o444)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// encodePack encodes the objects of r.batch as a pack (version 2, no
// deltas) and its index (version 2), and returns them and the pack's
// checksum. The entries are zlib streams of stored (uncompressed) blocks,
// which every git reads: compressing cost more than the rest of writing
// (a zlib writer clears its tables for every object), the objects are
// small and mostly trees (object names, which do not compress), and `git
// gc` compresses them.
func (r *repo) encodePack() (pack, idx []byte, sum plumbing.Hash, err error) {
	var buf bytes.Buffer
	var hdr [12]byte
	copy(hdr[:4], "PACK")
	binary.BigEndian.PutUint32(hdr[4:8], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(r.batch)))
	buf.Write(hdr[:])
	w := new(idxfile.Writer)
	if err := w.OnHeader(uint32(len(r.batch))); err != nil {
		return nil, nil, sum, err
	}
	if r.zw == nil {
		if r.zw, err = zlib.NewWriterLevel(nil, zlib.NoCompression); err != nil {
			return nil, nil, sum, err
		}
	}
	for _, h := range r.batch {
		o := r.mem[h]
		offset := buf.Len()
		buf.Write(entryHeader(o.Type(), o.Size()))
		r.zw.Reset(&buf)
		rd, err := o.Reader()
		if err != nil {
			return nil, nil, sum, err
		}
		if _, err := io.Copy(r.zw, rd); err != nil {
			return nil, nil, sum, err
		}
		if err := r.zw.Close(); err != nil {
			return nil, nil, sum, err
		}
		w.Add(h, uint64(offset), crc32.ChecksumIEEE(buf.Bytes()[offset:]))
	}
	sum = plumbing.Hash(sha1.Sum(buf.Bytes()))
	buf.Write(sum[:])
	if err := w.OnFooter(sum); err != nil {
		return nil, nil, sum, err
	}
	mi, err := w.Index()
	if err != nil {
		return nil, nil, sum, err
	}
	var ib bytes.Buffer
	if _, err := idxfile.NewEncoder(&ib).Encode(mi); err != nil {
		return nil, nil, sum, fmt.Errorf("encode the pack index: %w", err)
	}
	return buf.Bytes(), ib.Bytes(), sum, nil
}

// idxFS is a file system whose pack indexes (.idx files) are read through
// a buffer. go-git reads an index with a read(2) for every 4 bytes of its
// fan-out table and for every bucket of its names, CRCs and offsets: more
// than 1,000 system calls for the index of the smallest pack, which was
// most of the cost of reading the list of packs again.
type idxFS struct {
	billy.Filesystem
}

// Open opens the file name for reading.
func (fs idxFS) Open(name string) (billy.File, error) {
	f, err := fs.Filesystem.Open(name)
	if err != nil || !strings.HasSuffix(name, ".idx") {
		return f, err
	}
	return &bufferedFile{File: f, r: bufio.NewReaderSize(f, 64<<10)}, nil
}

// Capabilities returns those of the underlying file system.
func (fs idxFS) Capabilities() billy.Capability {
	return billy.Capabilities(fs.Filesystem)
}

// bufferedFile is a file read sequentially through a buffer.
type bufferedFile struct {
	billy.File
	r *bufio.Reader
}

func (f *bufferedFile) Read(p []byte) (int, error) { return f.r.Read(p) }

// Seek fails: the buffer is for sequential reads.
func (f *bufferedFile) Seek(int64, int) (int64, error) {
	return 0, errors.New("seek in a pack index read through a buffer")
}
