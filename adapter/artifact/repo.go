package artifact

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// objectCacheSize bounds the decoded objects each open repository keeps in
// memory. Submission records are small; the recent commits and trees of a
// busy repository fit many times over.
const objectCacheSize = 16 * cache.MiByte

// lockFile is the file, in a repository's git directory, whose flock(2)
// serialises writers across Adapters and processes.
const lockFile = "lifecycle.lock"

// repo is one open repository. Objects are encoded and hashed by go-git,
// written here as loose objects (see store) and read through go-git's
// object storage, behind a cache of the decoded commits and trees this
// package needs. Refs are read through go-git and written here, each by
// writing "<ref>.lock" and renaming it over the ref, as git does, so a
// reader (this package or the git CLI) sees the old value or the new one,
// never a torn file.
type repo struct {
	name   string
	path   string // the worktree directory; never checked out
	gitDir string
	st     *filesystem.Storage

	// sem serialises every use of the repository by this Adapter; the
	// fields below are guarded by it.
	sem     chan struct{}
	pulls   *pullSet              // the pull requests as of pulls.commit, or nil
	objects map[plumbing.Hash]any // decoded objects: commitInfo, []object.TreeEntry
	zw      *zlib.Writer          // reused for every object written
	buf     bytes.Buffer          // the object being written
	objDirs map[string]bool       // the objects/xx directories known to exist
}

// maxCachedObjects bounds repo.objects; it is emptied when full.
const maxCachedObjects = 4096

// newRepo returns the repository whose git directory is path/.git.
func newRepo(name, path string) *repo {
	gitDir := filepath.Join(path, git.GitDirName)
	return &repo{
		name:    name,
		path:    path,
		gitDir:  gitDir,
		st:      openStorage(gitDir),
		sem:     make(chan struct{}, 1),
		objects: make(map[plumbing.Hash]any),
		objDirs: make(map[string]bool),
	}
}

// cache remembers a decoded object; objects never change.
func (r *repo) cache(h plumbing.Hash, v any) {
	if len(r.objects) >= maxCachedObjects {
		clear(r.objects)
	}
	r.objects[h] = v
}

// acquire takes r's semaphore, giving up when ctx is done.
func (r *repo) acquire(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *repo) release() { <-r.sem }

// lockWrites takes r's semaphore and then the repository's file lock, which
// other Adapters and processes using the same directory also take before
// they write. The returned function releases both.
func (r *repo) lockWrites(ctx context.Context) (unlock func(), err error) {
	if err := r.acquire(ctx); err != nil {
		return nil, err
	}
	f, err := osfs.New(r.gitDir).OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		r.release()
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := f.Lock(); err != nil {
		f.Close()
		r.release()
		return nil, fmt.Errorf("lock %s: %w", lockFile, err)
	}
	return func() {
		// Closing the file releases the lock.
		f.Close()
		r.release()
	}, nil
}

// openStorage opens the object and ref storage of the git directory dir.
func openStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(objectCacheSize), filesystem.Options{})
}

// initRepo creates the repository name under parent, atomically: it is
// initialised in a temporary directory with an initial commit on base, then
// renamed into place. When another Adapter or process created it first,
// initRepo leaves that one alone and reports no error.
func initRepo(parent, name, base string, sig object.Signature) error {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	baseRef := plumbing.NewBranchReferenceName(base)
	if _, err := git.PlainInitWithOptions(tmp, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: baseRef}}); err != nil {
		return fmt.Errorf("git init: %w", err)
	}
	r := newRepo(name, tmp)
	readme := fmt.Sprintf("# %s\n\nThis repository is kept by the artifact adapter of lifecycle.\n"+
		"Each task's submissions are committed on its branch under %s/<task>/;\n"+
		"merged pull requests are merged into %s. Pull request records are\n"+
		"committed on %s.\n", name, recordDir, base, pullsRef)
	blob, err := r.writeBlob([]byte(readme))
	if err != nil {
		return err
	}
	tree, err := r.writeTree([]object.TreeEntry{{Name: "README.md", Mode: filemode.Regular, Hash: blob}})
	if err != nil {
		return err
	}
	commit, err := r.writeCommit(&object.Commit{
		Author:    sig,
		Committer: sig,
		Message:   "Initial commit\n",
		TreeHash:  tree,
	})
	if err != nil {
		return err
	}
	if err := r.setRef(baseRef, commit, plumbing.ZeroHash); err != nil {
		return err
	}
	err = os.Rename(tmp, filepath.Join(parent, name))
	if err != nil && isExist(filepath.Join(parent, name)) {
		return nil // created by someone else meanwhile
	}
	return err
}

func isExist(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ref returns the commit a ref points to, or the zero hash when there is
// no such ref.
func (r *repo) ref(name plumbing.ReferenceName) (plumbing.Hash, error) {
	ref, err := r.st.Reference(name)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", name, err)
	}
	if ref.Type() != plumbing.HashReference {
		return plumbing.ZeroHash, fmt.Errorf("read %s: a symbolic ref", name)
	}
	return ref.Hash(), nil
}

// errRefMoved means a ref was not at the value a writer expected: someone
// wrote to the repository without taking the lock (the git CLI, say).
var errRefMoved = errors.New("ref moved under us; is another program writing to the repository?")

// setRef points ref name at h if it still points at old (zero: does not
// exist). The caller holds the write lock.
func (r *repo) setRef(name plumbing.ReferenceName, h, old plumbing.Hash) error {
	cur, err := r.ref(name)
	if err != nil {
		return err
	}
	if cur != old {
		return fmt.Errorf("update %s: %w", name, errRefMoved)
	}
	path := filepath.Join(r.gitDir, filepath.FromSlash(name.String()))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	// The write lock is held, so a "<ref>.lock" found here is left over by
	// a crashed writer and may be overwritten.
	lock := path + ".lock"
	if err := os.WriteFile(lock, []byte(h.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	if err := os.Rename(lock, path); err != nil {
		os.Remove(lock)
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil
}

// getObject reads an object. When it is missing, the pack index is
// reloaded once, in case `git gc` packed the loose objects meanwhile.
func getObject[T any](r *repo, get func() (T, error)) (T, error) {
	v, err := get()
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		r.st.Reindex()
		v, err = get()
	}
	return v, err
}

// commitInfo is what the adapter needs of most commits.
type commitInfo struct {
	tree    plumbing.Hash
	parents []plumbing.Hash
	message string
}

// commitInfo reads a commit, from the cache when it can.
func (r *repo) commitInfo(h plumbing.Hash) (commitInfo, error) {
	if c, ok := r.objects[h].(commitInfo); ok {
		return c, nil
	}
	c, err := r.commit(h)
	if err != nil {
		return commitInfo{}, err
	}
	info := commitInfo{tree: c.TreeHash, parents: c.ParentHashes, message: c.Message}
	r.cache(h, info)
	return info, nil
}

// commit reads a commit with go-git, which can then walk its history.
func (r *repo) commit(h plumbing.Hash) (*object.Commit, error) {
	c, err := getObject(r, func() (*object.Commit, error) { return object.GetCommit(r.st, h) })
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", h, err)
	}
	return c, nil
}

// tree returns the entries of a tree, from the cache when it can; the zero
// hash is the empty tree. The slice is the caller's.
func (r *repo) tree(h plumbing.Hash) ([]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	if es, ok := r.objects[h].([]object.TreeEntry); ok {
		return slices.Clone(es), nil
	}
	t, err := getObject(r, func() (*object.Tree, error) { return object.GetTree(r.st, h) })
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	r.cache(h, slices.Clone(t.Entries))
	return slices.Clone(t.Entries), nil
}

// blob returns the content of a blob.
func (r *repo) blob(h plumbing.Hash) ([]byte, error) {
	b, err := getObject(r, func() (*object.Blob, error) { return object.GetBlob(r.st, h) })
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer rd.Close()
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return data, nil
}

// writeBlob stores data as a blob.
func (r *repo) writeBlob(data []byte) (plumbing.Hash, error) {
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	if _, err := o.Write(data); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	return r.store(o)
}

// writeTree sorts entries in git's order and stores them as a tree.
func (r *repo) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sort.Sort(object.TreeEntrySorter(entries))
	o := &plumbing.MemoryObject{}
	if err := (&object.Tree{Entries: entries}).Encode(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write tree: %w", err)
	}
	h, err := r.store(o)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r.cache(h, slices.Clone(entries))
	return h, nil
}

// writeCommit stores c.
func (r *repo) writeCommit(c *object.Commit) (plumbing.Hash, error) {
	o := &plumbing.MemoryObject{}
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write commit: %w", err)
	}
	h, err := r.store(o)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r.cache(h, commitInfo{tree: c.TreeHash, parents: slices.Clone(c.ParentHashes), message: c.Message})
	return h, nil
}

// store writes o as a loose object, as git does: into a temporary file in
// its objects/xx directory, renamed into place once complete. go-git
// encodes and hashes the object; it is written here because go-git's
// writer compresses at zlib's default level, which costs more than the
// rest of a submission. The zlib stream here has stored (uncompressed)
// blocks, which every git reads: the objects are small, a loose object
// takes a whole file-system block anyway, and `git gc` compresses them
// when it packs them.
func (r *repo) store(o *plumbing.MemoryObject) (h plumbing.Hash, err error) {
	h = o.Hash()
	if err := r.storeAs(h, o); err != nil {
		return h, fmt.Errorf("write %s %s: %w", o.Type(), h, err)
	}
	return h, nil
}

func (r *repo) storeAs(h plumbing.Hash, o *plumbing.MemoryObject) error {
	r.buf.Reset()
	if r.zw == nil {
		zw, err := zlib.NewWriterLevel(&r.buf, zlib.NoCompression)
		if err != nil {
			return err
		}
		r.zw = zw
	} else {
		r.zw.Reset(&r.buf)
	}
	rd, err := o.Reader()
	if err != nil {
		return err
	}
	fmt.Fprintf(r.zw, "%s %d\x00", o.Type(), o.Size())
	if _, err := io.Copy(r.zw, rd); err != nil {
		return err
	}
	if err := r.zw.Close(); err != nil {
		return err
	}

	name := h.String()
	dir := filepath.Join(r.gitDir, "objects", name[:2])
	if !r.objDirs[name[:2]] {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		r.objDirs[name[:2]] = true
	}
	// Created read-only, as git leaves objects, in one call.
	tmp := filepath.Join(dir, fmt.Sprintf("tmp_obj_%016x", rand.Uint64()))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if errors.Is(err, fs.ErrNotExist) {
		// The directory went away (`git gc` removes empty ones).
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(r.buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name[2:]))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// file is a file to write into a tree.
type file struct {
	name string
	data []byte
}

// putFiles returns the tree root with files written into the directory at
// path (its components), creating the directories that are missing.
func (r *repo) putFiles(root plumbing.Hash, path []string, files []file) (plumbing.Hash, error) {
	entries, err := r.tree(root)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if len(path) == 0 {
		for _, f := range files {
			h, err := r.writeBlob(f.data)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if entries, err = setEntry(entries, object.TreeEntry{Name: f.name, Mode: filemode.Regular, Hash: h}); err != nil {
				return plumbing.ZeroHash, err
			}
		}
		return r.writeTree(entries)
	}
	var sub plumbing.Hash
	for _, e := range entries {
		if e.Name == path[0] {
			sub = e.Hash
			if e.Mode != filemode.Dir {
				return plumbing.ZeroHash, fmt.Errorf("%s is a file, not a directory", path[0])
			}
		}
	}
	sub, err = r.putFiles(sub, path[1:], files)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s/%w", path[0], err)
	}
	if entries, err = setEntry(entries, object.TreeEntry{Name: path[0], Mode: filemode.Dir, Hash: sub}); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.writeTree(entries)
}

// setEntry adds e to entries or replaces the entry of the same name, which
// must be of the same kind (file or directory).
func setEntry(entries []object.TreeEntry, e object.TreeEntry) ([]object.TreeEntry, error) {
	for i := range entries {
		if entries[i].Name == e.Name {
			if (entries[i].Mode == filemode.Dir) != (e.Mode == filemode.Dir) {
				return nil, fmt.Errorf("%s exists as another kind of entry", e.Name)
			}
			entries[i] = e
			return entries, nil
		}
	}
	return append(entries, e), nil
}

// errMergeConflict means both sides of a merge changed the same path.
var errMergeConflict = errors.New("changed on both sides")

// mergeTrees merges, in three ways, the changes from base to theirs into
// ours and returns the resulting tree. Subtrees changed on one side only
// are taken whole; a path changed differently on both sides is a conflict
// (errMergeConflict), reported with the path.
func (r *repo) mergeTrees(base, ours, theirs plumbing.Hash, path string) (plumbing.Hash, error) {
	switch {
	case ours == theirs, base == theirs:
		return ours, nil
	case base == ours:
		return theirs, nil
	}
	b, err := r.tree(base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	o, err := r.tree(ours)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	t, err := r.tree(theirs)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	index := func(es []object.TreeEntry) map[string]object.TreeEntry {
		m := make(map[string]object.TreeEntry, len(es))
		for _, e := range es {
			m[e.Name] = e
		}
		return m
	}
	bm, om, tm := index(b), index(o), index(t)
	names := make(map[string]bool, len(o)+len(t))
	for _, es := range [][]object.TreeEntry{b, o, t} {
		for _, e := range es {
			names[e.Name] = true
		}
	}
	var out []object.TreeEntry
	for _, name := range slices.Sorted(maps.Keys(names)) {
		be, bok := bm[name]
		oe, ook := om[name]
		te, tok := tm[name]
		same := func(x object.TreeEntry, xok bool, y object.TreeEntry, yok bool) bool {
			return xok == yok && x.Mode == y.Mode && x.Hash == y.Hash
		}
		var res object.TreeEntry
		var keep bool
		switch {
		case same(oe, ook, te, tok), same(be, bok, te, tok):
			res, keep = oe, ook
		case same(be, bok, oe, ook):
			res, keep = te, tok
		case ook && tok && oe.Mode == filemode.Dir && te.Mode == filemode.Dir && (!bok || be.Mode == filemode.Dir):
			var bh plumbing.Hash
			if bok {
				bh = be.Hash
			}
			h, err := r.mergeTrees(bh, oe.Hash, te.Hash, path+name+"/")
			if err != nil {
				return plumbing.ZeroHash, err
			}
			res, keep = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}, true
		default:
			return plumbing.ZeroHash, fmt.Errorf("%s%s: %w", path, name, errMergeConflict)
		}
		if keep {
			out = append(out, res)
		}
	}
	return r.writeTree(out)
}

// trailer returns the value of a "Key: value" trailer in the last
// paragraph of a commit message, or "".
func trailer(msg, key string) string {
	msg = strings.TrimRight(msg, "\n")
	if i := strings.LastIndex(msg, "\n\n"); i >= 0 {
		msg = msg[i+2:]
	} else {
		return ""
	}
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(line, key+": "); ok {
			return v
		}
	}
	return ""
}

// message builds a commit message from a subject, an optional body and
// trailers (key, value pairs), which come last so that trailer finds them
// whatever the body says. Callers pass at least one trailer that always has
// a value.
func message(subject, body string, trailers ...string) string {
	var b bytes.Buffer
	b.WriteString(oneLine(subject))
	b.WriteString("\n")
	if body = strings.TrimSpace(gitText(body)); body != "" {
		b.WriteString("\n")
		b.WriteString(body)
		b.WriteString("\n")
	}
	sep := "\n"
	for i := 0; i+1 < len(trailers); i += 2 {
		if v := oneLine(trailers[i+1]); v != "" {
			fmt.Fprintf(&b, "%s%s: %s\n", sep, trailers[i], v)
			sep = ""
		}
	}
	return b.String()
}

// signature returns the configured identity at time now.
func signature(name, email string, now time.Time) object.Signature {
	return object.Signature{Name: name, Email: email, When: now}
}
