package artifact

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/tasklifecycle/lifecycle/adapter/internal/gittext"
)

// objectCacheSize bounds the decoded objects each open repository keeps in
// memory. Submission records are small; the recent commits and trees of a
// busy repository fit many times over.
const objectCacheSize = 16 * cache.MiByte

// lockFile is the file, in a repository's git directory, whose flock(2)
// serialises writers across Adapters and processes.
const lockFile = "lifecycle.lock"

// repo is one open repository. Objects are encoded and hashed by go-git,
// written here, each write's new objects as one pack (see store and
// flush), and read through go-git's object storage, behind a cache of the
// decoded commits and trees this package needs. Refs are read through go-git and written here, each by
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
	// mem holds the objects written by this Adapter that r.st may not
	// know: those of batch, not written yet, and those of the packs
	// written since r.st last listed the packs (see reindex).
	mem   map[plumbing.Hash]*plumbing.MemoryObject
	batch []plumbing.Hash // the objects that the next flush writes, in order
	objs  memStorer       // reads r.mem, then r.packs, then r.st
	packs packSet         // the packs as last listed
	// cleaned is whether flush removed what a writer killed midway left.
	cleaned  bool
	spares   []string              // the spare files last listed, not taken since (see takeSpare)
	noSpares bool                  // a spare could not be moved: take none
	zw       *zlib.Writer          // reused for every pack written
	written  atomic.Int64          // objects written since the last packer run started; not guarded by sem
	scans    map[string]*mergeScan // findMerge's knowledge, by base branch
	// afterWrite runs at the end of every write, with r.sem held; the
	// Adapter starts packers from it.
	afterWrite func()
	// logger receives the errors that no operation reports; nil: none.
	logger *slog.Logger

	packing      atomic.Bool // a packer is running
	packsChanged atomic.Bool // a packer changed the packs since r.st listed them
}

// maxCachedObjects bounds repo.objects; it is emptied when full.
const maxCachedObjects = 4096

// newRepo returns the repository whose git directory is path/.git.
func newRepo(name, path string) *repo {
	gitDir := filepath.Join(path, git.GitDirName)
	r := &repo{
		name:    name,
		path:    path,
		gitDir:  gitDir,
		st:      openStorage(gitDir),
		sem:     make(chan struct{}, 1),
		objects: make(map[plumbing.Hash]any),
		mem:     make(map[plumbing.Hash]*plumbing.MemoryObject),
		scans:   make(map[string]*mergeScan),
	}
	r.objs = memStorer{Storage: r.st, r: r}
	r.packs.dir = filepath.Join(gitDir, "objects", "pack")
	r.reindex()
	return r
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
		if r.packsChanged.Swap(false) {
			r.reindex()
		}
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
		// The objects of a write that changed no ref, or failed to, are
		// written out too, harmlessly: no ref names them. When that fails
		// they stay in r.batch for the next write.
		if err := r.flush(); err != nil && r.logger != nil {
			r.logger.Warn("artifact: write objects", "repo", r.name, "err", err)
		}
		// Closing the file releases the lock.
		f.Close()
		if r.afterWrite != nil {
			r.afterWrite()
		}
		r.release()
	}, nil
}

// openStorage opens the object and ref storage of the git directory dir.
func openStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(idxFS{osfs.New(dir)}, cache.NewObjectLRU(objectCacheSize), filesystem.Options{})
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
	// The objects h names are written before the ref.
	if err := r.flush(); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
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

// getObject reads an object. When that fails, the list of packs is
// reloaded and the object read again, twice at most: a packer (this
// Adapter's, another's, or `git gc`) may have moved the object from a
// loose file or an old pack into a new pack meanwhile.
func getObject[T any](r *repo, get func() (T, error)) (T, error) {
	v, err := get()
	for range 2 {
		if err == nil {
			break
		}
		r.reindex()
		v, err = get()
	}
	return v, err
}

// commitInfo is what the adapter needs of most commits.
type commitInfo struct {
	tree    plumbing.Hash
	parents []plumbing.Hash
	message string
	when    int64 // committer time, Unix seconds
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
	info := commitInfo{tree: c.TreeHash, parents: c.ParentHashes, message: c.Message, when: c.Committer.When.Unix()}
	r.cache(h, info)
	return info, nil
}

// commit reads a commit with go-git, which can then walk its history.
func (r *repo) commit(h plumbing.Hash) (*object.Commit, error) {
	c, err := getObject(r, func() (*object.Commit, error) { return object.GetCommit(r.objs, h) })
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
	t, err := getObject(r, func() (*object.Tree, error) { return object.GetTree(r.objs, h) })
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	r.cache(h, slices.Clone(t.Entries))
	return slices.Clone(t.Entries), nil
}

// blob returns the content of a blob.
func (r *repo) blob(h plumbing.Hash) ([]byte, error) {
	b, err := getObject(r, func() (*object.Blob, error) { return object.GetBlob(r.objs, h) })
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

// writeTree sorts entries in git's order and stores them as a tree. It
// encodes the tree itself: go-git's Tree.Encode formats every entry with
// fmt and allocates to compare names, which counts in a tree of 10,000
// task directories.
func (r *repo) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	slices.SortFunc(entries, compareEntries)
	size := 0
	for _, e := range entries {
		size += len(e.Name) + 8 + len(e.Hash)
	}
	buf := make([]byte, 0, size)
	for _, e := range entries {
		if strings.IndexByte(e.Name, 0) >= 0 {
			return plumbing.ZeroHash, fmt.Errorf("write tree: malformed name %q", e.Name)
		}
		buf = strconv.AppendUint(buf, uint64(e.Mode), 8)
		buf = append(buf, ' ')
		buf = append(buf, e.Name...)
		buf = append(buf, 0)
		buf = append(buf, e.Hash[:]...)
	}
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.TreeObject)
	if _, err := o.Write(buf); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write tree: %w", err)
	}
	h, err := r.store(o)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r.cache(h, slices.Clone(entries))
	return h, nil
}

// compareEntries orders tree entries as git does: by name, a directory's
// name followed by '/'.
func compareEntries(a, b object.TreeEntry) int {
	n := min(len(a.Name), len(b.Name))
	if c := strings.Compare(a.Name[:n], b.Name[:n]); c != 0 {
		return c
	}
	next := func(e object.TreeEntry) int {
		switch {
		case n < len(e.Name):
			return int(e.Name[n])
		case e.Mode == filemode.Dir:
			return '/'
		}
		return -1
	}
	return cmp.Compare(next(a), next(b))
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
	r.cache(h, commitInfo{tree: c.TreeHash, parents: slices.Clone(c.ParentHashes), message: c.Message, when: c.Committer.When.Unix()})
	return h, nil
}

// store adds o to the objects of the write under way, which flush
// writes out as one pack before any ref names them; until then, and
// until r.st lists that pack, reads find it in r.mem.
func (r *repo) store(o *plumbing.MemoryObject) (plumbing.Hash, error) {
	h := o.Hash()
	if _, ok := r.mem[h]; !ok {
		r.mem[h] = o
		r.batch = append(r.batch, h)
	}
	return h, nil
}

// file is a file to write into a tree.// file is a file to write into a tree.
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
	// A merge of the three lists sorted by name, without maps: the
	// .lifecycle directory has an entry per task.
	byName := func(x, y object.TreeEntry) int { return strings.Compare(x.Name, y.Name) }
	slices.SortFunc(b, byName)
	slices.SortFunc(o, byName)
	slices.SortFunc(t, byName)
	same := func(x object.TreeEntry, xok bool, y object.TreeEntry, yok bool) bool {
		return xok == yok && (!xok || x.Mode == y.Mode && x.Hash == y.Hash)
	}
	out := make([]object.TreeEntry, 0, max(len(o), len(t)))
	for len(b) > 0 || len(o) > 0 || len(t) > 0 {
		name, first := "", true
		for _, es := range [][]object.TreeEntry{b, o, t} {
			if len(es) > 0 && (first || es[0].Name < name) {
				name, first = es[0].Name, false
			}
		}
		take := func(es *[]object.TreeEntry) (object.TreeEntry, bool) {
			if len(*es) > 0 && (*es)[0].Name == name {
				e := (*es)[0]
				*es = (*es)[1:]
				return e, true
			}
			return object.TreeEntry{}, false
		}
		be, bok := take(&b)
		oe, ook := take(&o)
		te, tok := take(&t)
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
	b.WriteString(gittext.OneLine(subject))
	b.WriteString("\n")
	if body = strings.TrimSpace(gittext.Text(body)); body != "" {
		b.WriteString("\n")
		b.WriteString(body)
		b.WriteString("\n")
	}
	sep := "\n"
	for i := 0; i+1 < len(trailers); i += 2 {
		if v := gittext.OneLine(trailers[i+1]); v != "" {
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
