package taskcache

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Cache keeps encodings of tasks by revision, within a limit of bytes.
// Encodings are named by their form, so that one task may be kept in
// several (up to maxForms). It is safe for concurrent use.
type Cache struct {
	revs  lifecycletype.TaskRevisioner
	limit int64 // bytes of encodings, IDs and entries kept at most

	mu   sync.RWMutex
	size int64
	byID map[string]*cachedTask
}

// cachedTask is the encodings kept for one task at one revision. It
// never changes once in the cache: a new encoding replaces it with a copy,
// so a reader holds its slices without the lock.
type cachedTask struct {
	rev   int64
	forms []encodedTask
}

// encodedTask is one encoding of a task: its form's name, its bytes, and
// the condition beyond the task's row it holds under ("" for none).
type encodedTask struct {
	form string
	b    []byte
	cond string
}

// size is what e's encodings cost.
func (e *cachedTask) size() int64 {
	var n int64
	for _, f := range e.forms {
		n += int64(len(f.form) + len(f.b) + len(f.cond))
	}
	return n
}

// maxForms bounds the encodings kept per task.
const maxForms = 8

// entryOverhead is what an entry costs besides its encodings and ID: the
// struct, the map slot, the slice headers.
const entryOverhead = 128

// New returns a cache of limit bytes over the Store's revisions, or nil
// when the Store has none (revs is nil) or limit is negative.
func New(revs lifecycletype.TaskRevisioner, limit int64) *Cache {
	if revs == nil || limit < 0 {
		return nil
	}
	return &Cache{revs: revs, limit: limit, byID: make(map[string]*cachedTask)}
}

// Revision reads the revision of a task from the Store. An error is the
// Store's, unwrapped; when it matches [lifecycletype.ErrNotFound] the
// task's encodings are dropped.
func (c *Cache) Revision(ctx context.Context, id string) (int64, error) {
	rev, err := c.revs.TaskRevision(ctx, id)
	if errors.Is(err, lifecycletype.ErrNotFound) {
		c.Forget(id)
	}
	return rev, err
}

// Get returns the encoding of form kept for the task at rev, or nil, and
// the condition it was put with: a reader serves the bytes only while the
// condition holds. The bytes are shared: do not modify them.
func (c *Cache) Get(id string, rev int64, form string) (b []byte, cond string) {
	c.mu.RLock()
	e := c.byID[id]
	c.mu.RUnlock()
	if e == nil || e.rev != rev {
		return nil, ""
	}
	for _, f := range e.forms {
		if f.form == form {
			return f.b, f.cond
		}
	}
	return nil, ""
}

// Put keeps the encoding b of form for the task at rev, unless an
// encoding at a later revision is kept, the task has maxForms already, or
// b is too large to be worth a slot (an eighth of the cache). cond names
// what else than the task's row the encoding depends on, in words its
// reader checks ("" for nothing): an encoding of the same form and
// revision kept under another condition is replaced. It evicts tasks at
// random until the cache fits. b must not be modified afterwards.
func (c *Cache) Put(id string, rev int64, form, cond string, b []byte) {
	cost := int64(len(form) + len(b) + len(cond))
	if cost > c.limit/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.byID[id]
	e := &cachedTask{rev: rev}
	switch {
	case old == nil:
		cost += int64(len(id)) + entryOverhead
	case old.rev > rev:
		return // a later revision is kept
	case old.rev == rev:
		i := slices.IndexFunc(old.forms, func(f encodedTask) bool { return f.form == form })
		switch {
		case i >= 0 && old.forms[i].cond == cond:
			return // kept meanwhile
		case i >= 0: // kept under another condition: replaced
			f := old.forms[i]
			cost -= int64(len(f.form) + len(f.b) + len(f.cond))
			e.forms = slices.Delete(slices.Clone(old.forms), i, i+1)
		case len(old.forms) == maxForms:
			return
		default:
			e.forms = append(make([]encodedTask, 0, len(old.forms)+1), old.forms...)
		}
	default:
		cost -= old.size()
	}
	e.forms = append(e.forms, encodedTask{form, b, cond})
	c.byID[id] = e
	c.size += cost
	for key, victim := range c.byID { // a map's order is random enough
		if c.size <= c.limit {
			break
		}
		if key != id {
			c.drop(key, victim)
		}
	}
}

// Forget drops the encodings of a task that is gone.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byID[id]; e != nil {
		c.drop(id, e)
	}
}

// drop removes an entry; c.mu is held.
func (c *Cache) drop(id string, e *cachedTask) {
	delete(c.byID, id)
	c.size -= int64(len(id)) + entryOverhead + e.size()
}
