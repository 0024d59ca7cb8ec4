package artifact

import (
	"bufio"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Packing keeps the cost of reading and writing a repository flat as it
// grows. Every write adds a small pack (see write.go); a repository an
// older version of this package wrote, or that git wrote to, may also
// hold loose objects (one file each). Once an Adapter has written
// Config.PackAfter objects to a repository, a goroutine packs every loose
// object of the repository into one new pack and removes the loose
// copies, if there are any; then, so that the number of packs stays
// logarithmic, it merges the smallest packs into one while the packs,
// smallest first, are not a geometric progression of ratio 2 (each pack
// at least twice as big as all smaller ones together), as `git repack
// --geometric=2` does. Each object is so rewritten at most about
// log2(objects) times, a reader that lists the packs finds about
// PackAfter/10 small packs (a write adds about ten objects) and
// log2(objects) others, and no operation on the repository waits for a
// pack: the packer takes neither the repository's lock nor its file
// lock, only its own file lock, lifecycle-pack.lock, which keeps two
// packers (of two Adapters, in one process or several) from working on a
// repository at once.
//
// A pack is written into temporary files, its index renamed into
// objects/pack first and the pack second (go-git finds packs by their
// .pack file, git by their .idx, and each ignores a pack without the
// other file), and only then are the objects it holds removed: loose
// objects after a new pack, old packs (.pack first) after their merged
// pack. A process killed at any point loses no object, at worst leaving
// an object both loose and packed, or a temporary file that the next
// packer removes. Readers that looked for an object where it no longer
// is look again after reloading the list of packs (see getObject).

// packLockFile is the file, in a repository's git directory, whose
// flock(2) serialises packers.
const packLockFile = "lifecycle-pack.lock"

// packTmpPrefix starts the temporary files of a packer in objects/pack.
const packTmpPrefix = "tmp_lifecycle_pack_"

// defaultPackAfter is Config.PackAfter's default.
const defaultPackAfter = 256

// packGeometry is the ratio between successive packs, smallest first,
// below which the smaller packs are merged.
const packGeometry = 2

// maybePack starts a packer for r when PackAfter objects were written
// since the last one started and none is running.
func (a *Adapter) maybePack(r *repo) {
	if a.cfg.PackAfter <= 0 || r.written.Load() < int64(a.cfg.PackAfter) {
		return
	}
	a.startPacker(r, false)
}

// startPacker runs r's packer in a goroutine unless one is running or the
// Adapter is closed. The packer runs at least once when now is set, and
// otherwise while PackAfter objects were written since its last run.
func (a *Adapter) startPacker(r *repo, now bool) {
	if !r.packing.CompareAndSwap(false, true) {
		return
	}
	a.packMu.Lock()
	defer a.packMu.Unlock()
	if a.closed {
		r.packing.Store(false)
		return
	}
	a.packers.Add(1)
	go func() {
		defer a.packers.Done()
		defer r.packing.Store(false)
		// Writes go on while a run packs: when they wrote PackAfter
		// objects meanwhile, which started no packer since this one was
		// running, run again at once. What a run leaves counts towards the
		// next.
		for first := now; ; first = false {
			n := r.written.Load()
			if !first && n < int64(a.cfg.PackAfter) {
				return
			}
			r.written.Add(-n)
			if err := packRepo(r.gitDir, r.packsChanged.Store, r.removePacks); err != nil {
				a.cfg.Logger.Warn("artifact: pack a repository", "repo", r.name, "err", err)
				return
			}
		}
	}()
}

// Close waits for the packers the Adapter started and starts no more, and
// stops the checks of merge queue candidates (Config.QueueCheck's context
// ends, Config.QueueCommand's process is killed) and waits for them; their
// results are not kept, and Checks of a candidate then fails with an error
// matching [lifecycle.ErrClosed]. The Adapter keeps working otherwise: its
// repositories just collect small packs, unmerged. It returns nil; the
// error is for io.Closer.
func (a *Adapter) Close() error {
	a.packMu.Lock()
	a.closed = true
	a.packMu.Unlock()
	a.queue.close()
	a.packers.Wait()
	return nil
}

// removePacks removes the packs whose paths, without extension, are bases.
// go-git reads the list of packs and then the index of each, and fails
// when a pack it listed is gone meanwhile. So the packs are removed with
// packsLockFile held, which Adapters hold while go-git reads the list
// (see repo.reindex), and with r's semaphore held, so that none of r's
// operations reads an object meanwhile from a pack it listed before: the
// operation under way, if any, ends first, and only the removal waits
// for it. Then r reads the list again.
func (r *repo) removePacks(bases []string) error {
	r.sem <- struct{}{}
	defer r.release()
	unlock, err := lockGitFile(r.gitDir, packsLockFile)
	if err != nil {
		return err
	}
	for _, base := range bases {
		// The .pack first: go-git lists packs by it.
		for _, ext := range []string{".pack", ".idx", ".rev", ".bitmap", ".mtimes", ".promisor"} {
			if err := os.Remove(base + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
				unlock()
				return err
			}
		}
	}
	unlock()
	r.packsChanged.Store(false)
	r.reindex()
	return nil
}

// packRepo packs the loose objects of the repository whose git directory
// is gitDir, then merges small packs (see the comment at the top of this
// file). changed(true) is called whenever the packs changed; remove
// removes packs that a merged pack replaced (see repo.removePacks).
func packRepo(gitDir string, changed func(bool), remove func(bases []string) error) (err error) {
	lock, err := osfs.New(gitDir).OpenFile(packLockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", packLockFile, err)
	}
	defer lock.Close() // releases the lock
	if err := lock.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", packLockFile, err)
	}
	// Spares first, for the writes that go on while this packer works.
	spareErr := fillSpares(gitDir)
	defer func() {
		if err == nil {
			err = spareErr
		}
	}()
	packDir := filepath.Join(gitDir, "objects", "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		return err
	}
	// Leftovers of a packer that stopped midway.
	if old, err := filepath.Glob(filepath.Join(packDir, packTmpPrefix+"*")); err == nil {
		for _, o := range old {
			os.Remove(o)
		}
	}
	// Its own storage, which keeps pack files open while it reads them.
	st := filesystem.NewStorageWithOptions(idxFS{osfs.New(gitDir)}, cache.NewObjectLRU(cache.MiByte), filesystem.Options{KeepDescriptors: true})
	defer st.Close()

	loose, err := looseObjects(gitDir)
	if err != nil {
		return err
	}
	if len(loose) > 0 {
		if _, err := writePack(packDir, loose, encodeFrom(st)); err != nil {
			return fmt.Errorf("pack %d loose objects: %w", len(loose), err)
		}
		changed(true)
		for _, h := range loose {
			s := h.String()
			if err := os.Remove(filepath.Join(gitDir, "objects", s[:2], s[2:])); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	st.Reindex()
	return mergePacks(st, packDir, changed, remove)
}

// looseObjects lists the loose objects of a git directory.
func looseObjects(gitDir string) ([]plumbing.Hash, error) {
	var out []plumbing.Hash
	for i := range 256 {
		dir := fmt.Sprintf("%02x", i)
		names, err := os.ReadDir(filepath.Join(gitDir, "objects", dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if h, ok := parseHash(dir + n.Name()); ok {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

// packInfo is a pack of a repository.
type packInfo struct {
	sum   plumbing.Hash
	count int
}

// mergePacks merges the smallest packs of packDir into one while they do
// not grow geometrically. Packs with a .keep file are left alone.
func mergePacks(st objectReader, packDir string, changed func(bool), remove func(bases []string) error) error {
	entries, err := os.ReadDir(packDir)
	if err != nil {
		return err
	}
	var packs []packInfo
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok || !strings.HasPrefix(name, "pack-") {
			continue
		}
		if !isExist(filepath.Join(packDir, name+".pack")) || isExist(filepath.Join(packDir, name+".keep")) {
			continue
		}
		h, ok := parseHash(strings.TrimPrefix(name, "pack-"))
		if !ok {
			continue
		}
		n, err := idxCount(filepath.Join(packDir, e.Name()))
		if err != nil {
			return err
		}
		packs = append(packs, packInfo{sum: h, count: n})
	}
	slices.SortFunc(packs, func(x, y packInfo) int { return x.count - y.count })
	// Merge packs[:k+1] for the largest k whose pack is not packGeometry
	// times as big as all smaller ones together.
	k, total := -1, 0
	for i, p := range packs {
		if i > 0 && p.count < packGeometry*total {
			k = i
		}
		total += p.count
	}
	if k < 1 {
		return nil
	}
	// The entries are copied pack by pack in the order they lie in, each
	// pack read once, sequentially; entries that are not deltas are
	// copied as they are, deltas (of packs made by git) are read whole
	// and compressed again. An object in several packs is copied once.
	var (
		objects []plumbing.Hash
		order   []packEntry
		seen    = make(map[plumbing.Hash]struct{})
	)
	for i, p := range packs[:k+1] {
		es, err := packEntries(filepath.Join(packDir, "pack-"+p.sum.String()+".idx"), i)
		if err != nil {
			return err
		}
		for _, e := range es {
			if _, ok := seen[e.hash]; ok {
				continue
			}
			seen[e.hash] = struct{}{}
			objects = append(objects, e.hash)
			order = append(order, e)
		}
	}
	enc := encodeFrom(st)
	var (
		next int                                 // the entry the next call copies
		cur  = -1                                // the pack rd reads
		pf   *os.File                            // that pack
		pos  int64                               // where rd is in it
		rd   = bufio.NewReaderSize(nil, 256<<10) // reads pf from pos
		buf  []byte                              // an entry copied
	)
	defer func() {
		if pf != nil {
			pf.Close()
		}
	}()
	sum, err := writePack(packDir, objects, func(w io.Writer, h plumbing.Hash) error {
		e := order[next]
		next++
		if e.pack != cur {
			if pf != nil {
				pf.Close()
			}
			var err error
			if pf, err = os.Open(filepath.Join(packDir, "pack-"+packs[e.pack].sum.String()+".pack")); err != nil {
				return err
			}
			cur, pos = e.pack, 0
			rd.Reset(pf)
		}
		if _, err := rd.Discard(int(e.offset - pos)); err != nil {
			return fmt.Errorf("read %s: %w", pf.Name(), err)
		}
		pos = e.offset
		b, err := rd.Peek(1)
		if err != nil {
			return fmt.Errorf("read %s: %w", pf.Name(), err)
		}
		if t := plumbing.ObjectType(b[0] >> 4 & 7); t == plumbing.OFSDeltaObject || t == plumbing.REFDeltaObject {
			return enc(w, h)
		}
		if e.size < 0 {
			// The last entry: it ends where the pack's checksum starts.
			fi, err := pf.Stat()
			if err != nil {
				return err
			}
			e.size = fi.Size() - int64(len(plumbing.ZeroHash)) - e.offset
		}
		buf = slices.Grow(buf[:0], int(e.size))[:e.size]
		n, err := io.ReadFull(rd, buf)
		pos += int64(n)
		if err != nil {
			return fmt.Errorf("read %s from %s: %w", h, pf.Name(), err)
		}
		_, err = w.Write(buf)
		return err
	})
	if err != nil {
		return fmt.Errorf("merge %d packs: %w", k+1, err)
	}
	changed(true)
	var old []string
	for _, p := range packs[:k+1] {
		if p.sum != sum {
			old = append(old, filepath.Join(packDir, "pack-"+p.sum.String()))
		}
	}
	return remove(old)
}

// idxCount returns the number of objects of a pack from its index: the
// last entry of the fan-out table.
func idxCount(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf [8 + 256*4]byte
	if _, err := io.ReadFull(f, buf[:]); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	if string(buf[:4]) != "\xfftOc" || binary.BigEndian.Uint32(buf[4:8]) != 2 {
		return 0, fmt.Errorf("read %s: not a version 2 pack index", path)
	}
	return int(binary.BigEndian.Uint32(buf[len(buf)-4:])), nil
}

// packEntry is where the entry of an object lies in a pack.
type packEntry struct {
	hash   plumbing.Hash
	pack   int   // the pack, an index into the packs being merged
	offset int64 // where the entry starts
	size   int64 // its length; -1 for the last entry of the pack
}

// packEntries returns the entries of the pack whose index is idxPath, in
// the order they lie in the pack, each with pack set to pack.
func packEntries(idxPath string, pack int) ([]packEntry, error) {
	xf, err := os.Open(idxPath)
	if err != nil {
		return nil, err
	}
	defer xf.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReader(xf)).Decode(idx); err != nil {
		return nil, fmt.Errorf("read %s: %w", idxPath, err)
	}
	it, err := idx.EntriesByOffset()
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []packEntry
	for {
		e, err := it.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", idxPath, err)
		}
		if n := len(out); n > 0 {
			out[n-1].size = int64(e.Offset) - out[n-1].offset
		}
		out = append(out, packEntry{hash: e.Hash, pack: pack, offset: int64(e.Offset), size: -1})
	}
	return out, nil
}

// objectReader reads objects; *filesystem.Storage is one.
type objectReader interface {
	EncodedObject(plumbing.ObjectType, plumbing.Hash) (plumbing.EncodedObject, error)
}

// entrySource writes the pack entry of an object: its header and
// compressed content.
type entrySource func(w io.Writer, h plumbing.Hash) error

// encodeFrom returns an entrySource that reads objects from st and
// compresses them.
func encodeFrom(st objectReader) entrySource {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	return func(w io.Writer, h plumbing.Hash) error {
		o, err := st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return fmt.Errorf("read %s: %w", h, err)
		}
		if _, err := w.Write(entryHeader(o.Type(), o.Size())); err != nil {
			return err
		}
		rd, err := o.Reader()
		if err != nil {
			return fmt.Errorf("read %s: %w", h, err)
		}
		defer rd.Close()
		zw.Reset(w)
		if _, err := io.Copy(zw, rd); err != nil {
			return fmt.Errorf("read %s: %w", h, err)
		}
		return zw.Close()
	}
}

// writePack writes objects into a new pack of packDir, their entries
// written by src, and its index, and returns its checksum. The index is
// renamed into place before the pack.
func writePack(packDir string, objects []plumbing.Hash, src entrySource) (sum plumbing.Hash, err error) {
	pf, err := os.CreateTemp(packDir, packTmpPrefix)
	if err != nil {
		return sum, err
	}
	defer func() {
		pf.Close()
		if err != nil {
			os.Remove(pf.Name())
		}
	}()
	sha := sha1.New()
	pw := &countingWriter{w: io.MultiWriter(pf, sha)}
	bw := bufio.NewWriterSize(pw, 64<<10)
	var hdr [12]byte
	copy(hdr[:4], "PACK")
	binary.BigEndian.PutUint32(hdr[4:8], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(objects)))
	if _, err := bw.Write(hdr[:]); err != nil {
		return sum, err
	}
	idx := new(idxfile.Writer)
	if err := idx.OnHeader(uint32(len(objects))); err != nil {
		return sum, err
	}
	crc := crc32.NewIEEE()
	ew := io.MultiWriter(bw, crc)
	for _, h := range objects {
		offset := pw.n + int64(bw.Buffered())
		crc.Reset()
		if err := src(ew, h); err != nil {
			return sum, err
		}
		idx.Add(h, uint64(offset), crc.Sum32())
	}
	if err := bw.Flush(); err != nil {
		return sum, err
	}
	copy(sum[:], sha.Sum(nil))
	if _, err := pf.Write(sum[:]); err != nil {
		return sum, err
	}
	if err := pf.Close(); err != nil {
		return sum, err
	}
	if err := idx.OnFooter(sum); err != nil {
		return sum, err
	}
	mi, err := idx.Index()
	if err != nil {
		return sum, err
	}
	xf, err := os.CreateTemp(packDir, packTmpPrefix)
	if err != nil {
		return sum, err
	}
	defer os.Remove(xf.Name()) // a no-op once renamed
	xb := bufio.NewWriter(xf)
	_, err = idxfile.NewEncoder(xb).Encode(mi)
	if err == nil {
		err = xb.Flush()
	}
	if cerr := xf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sum, fmt.Errorf("write the pack index: %w", err)
	}
	base := filepath.Join(packDir, "pack-"+sum.String())
	for _, f := range []*os.File{xf, pf} {
		os.Chmod(f.Name(), 0o444)
	}
	if err := os.Rename(xf.Name(), base+".idx"); err != nil {
		return sum, err
	}
	if err := os.Rename(pf.Name(), base+".pack"); err != nil {
		return sum, err
	}
	return sum, nil
}

// entryHeader encodes the type and size of a pack entry.
func entryHeader(t plumbing.ObjectType, size int64) []byte {
	b := []byte{byte(t)<<4 | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// parseHash parses a full hexadecimal object name.
func parseHash(s string) (plumbing.Hash, bool) {
	var h plumbing.Hash
	if len(s) != 2*len(h) {
		return h, false
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, false
	}
	return h, true
}
