package artifact

import (
	"bufio"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// packSet reads objects from the packs of a repository, keeping each pack
// open and its index in memory from one reading of the list of packs to
// the next (see refresh), so that reading the list again after a packer
// merged packs reads only the indexes of the new packs. go-git's object
// storage, reading the list again, reads every index again and, on the
// first read of an object from a pack, maps every offset of its index to
// a name (idxfile.MemoryIndex.FindHash): work in proportion to the
// objects of the repository, which a packer run caused every few
// operations. Entries that are deltas (in packs git made) are left to
// go-git's storage.
type packSet struct {
	dir   string        // objects/pack
	packs []*packReader // smallest first: the newest objects are there
	zr    io.ReadCloser // reused for every object read; nil until one is
	br    *bufio.Reader // reads the entry under zr
	hdr   [16]byte      // an entry's header
}

// packReader is an open pack and its index.
type packReader struct {
	sum   plumbing.Hash
	idx   *idxfile.MemoryIndex
	f     *os.File
	count int64
	size  int64
}

// errDelta means an object is a delta in its pack.
var errDelta = errors.New("a delta")

// refresh reads the list of packs: it loads the indexes of the packs it
// did not know and closes the packs that are gone. A pack whose index
// cannot be read (removed meanwhile, say) is left out.
func (ps *packSet) refresh() error {
	entries, err := os.ReadDir(ps.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("list packs: %w", err)
	}
	known := make(map[plumbing.Hash]*packReader, len(ps.packs))
	for _, p := range ps.packs {
		known[p.sum] = p
	}
	var packs []*packReader
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(name, "pack-") {
			continue
		}
		sum, ok := parseHash(strings.TrimPrefix(name, "pack-"))
		if !ok {
			continue
		}
		if p, ok := known[sum]; ok {
			packs = append(packs, p)
			delete(known, sum)
			continue
		}
		if p, err := openPack(filepath.Join(ps.dir, name), sum); err == nil {
			packs = append(packs, p)
		}
	}
	for _, p := range known {
		p.f.Close()
	}
	slices.SortFunc(packs, func(x, y *packReader) int { return int(x.count - y.count) })
	ps.packs = packs
	return nil
}

// openPack opens the pack base+".pack" and reads its index.
func openPack(base string, sum plumbing.Hash) (*packReader, error) {
	xf, err := os.Open(base + ".idx")
	if err != nil {
		return nil, err
	}
	defer xf.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReaderSize(xf, 64<<10)).Decode(idx); err != nil {
		return nil, fmt.Errorf("read %s.idx: %w", base, err)
	}
	if idx.PackfileChecksum != sum {
		return nil, fmt.Errorf("read %s.idx: the index of another pack", base)
	}
	n, err := idx.Count()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(base + ".pack")
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &packReader{sum: sum, idx: idx, f: f, count: n, size: fi.Size()}, nil
}

// get reads the object h: plumbing.ErrObjectNotFound when no pack has it,
// errDelta when its entry is a delta.
func (ps *packSet) get(h plumbing.Hash) (*plumbing.MemoryObject, error) {
	for _, p := range ps.packs {
		offset, err := p.idx.FindOffset(h)
		if err != nil {
			continue
		}
		o, err := ps.read(p, offset)
		if err != nil && !errors.Is(err, errDelta) {
			return nil, fmt.Errorf("read %s from pack %s: %w", h, p.sum, err)
		}
		return o, err
	}
	return nil, plumbing.ErrObjectNotFound
}

// read reads the entry at offset of p, which is not a delta.
func (ps *packSet) read(p *packReader, offset int64) (*plumbing.MemoryObject, error) {
	n, err := p.f.ReadAt(ps.hdr[:], offset)
	if n == 0 {
		return nil, err
	}
	t := plumbing.ObjectType(ps.hdr[0] >> 4 & 7)
	switch t {
	case plumbing.OFSDeltaObject, plumbing.REFDeltaObject:
		return nil, errDelta
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	default:
		return nil, fmt.Errorf("entry of type %d", t)
	}
	size := int64(ps.hdr[0] & 0x0f)
	i, shift := 0, 4
	for ps.hdr[i]&0x80 != 0 {
		i++
		if i >= n || shift > 56 {
			return nil, errors.New("malformed entry header")
		}
		size |= int64(ps.hdr[i]&0x7f) << shift
		shift += 7
	}
	start := offset + int64(i) + 1
	sec := io.NewSectionReader(p.f, start, p.size-start)
	if ps.br == nil {
		ps.br = bufio.NewReaderSize(sec, 32<<10)
	} else {
		ps.br.Reset(sec)
	}
	if ps.zr == nil {
		if ps.zr, err = zlib.NewReader(ps.br); err != nil {
			return nil, err
		}
	} else if err := ps.zr.(zlib.Resetter).Reset(ps.br, nil); err != nil {
		return nil, err
	}
	o := &plumbing.MemoryObject{}
	o.SetType(t)
	data := make([]byte, size)
	if _, err := io.ReadFull(ps.zr, data); err != nil {
		return nil, err
	}
	if _, err := o.Write(data); err != nil {
		return nil, err
	}
	return o, nil
}
