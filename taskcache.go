package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// EncodedTask returns the task with taskID as encode encodes it: the
// bytes GET /tasks/{id} would answer, in the form of another protocol, or
// any encoding that depends on nothing but the task (its available
// actions included). When the Store implements [TaskRevisioner], the
// encoding is kept under form (see [Config.TaskCacheBytes]), and a later
// call with the same form reads the task's revision and, while it is the
// same, returns the kept bytes without reading the task or calling encode.
// Give each encoding its own form; forms beginning with "lifecycle:" are
// the Service's own. The bytes returned are shared: do not modify them.
// A task that does not exist is an error matching [ErrNotFound].
func (s *Service) EncodedTask(ctx context.Context, taskID, form string, encode func(*Task) ([]byte, error)) ([]byte, error) {
	if strings.HasPrefix(form, ownForms) {
		return nil, fmt.Errorf("lifecycle: EncodedTask: form %q: the forms beginning with %q are the Service's own", form, ownForms)
	}
	return s.encodedTask(ctx, taskID, form, encode)
}

// ownForms begins the names of the Service's own encodings of tasks.
const ownForms = "lifecycle:"

// The encodings of GET /tasks/{id}'s answers.
const (
	formStandard = ownForms + "standard"
	formCompact  = ownForms + "compact"
)

func encodeStandard(t *Task) ([]byte, error) { return encodeTask(t, false) }
func encodeCompact(t *Task) ([]byte, error)  { return encodeTask(t, true) }

// encodedTask is EncodedTask for every form.
func (s *Service) encodedTask(ctx context.Context, taskID, form string, encode func(*Task) ([]byte, error)) ([]byte, error) {
	if s.tasks == nil || !validTaskID(taskID) {
		t, err := s.Task(ctx, taskID)
		if err != nil {
			return nil, err
		}
		return encode(&t)
	}
	rev, err := s.tasks.revision(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if b := s.tasks.get(taskID, rev, form); b != nil {
		s.tel.TaskCacheLookup(ctx, true)
		return b, nil
	}
	s.tel.TaskCacheLookup(ctx, false)
	t, err := s.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	b, err := encode(&t)
	if err != nil {
		return nil, err
	}
	s.tasks.put(taskID, rev, form, b)
	return b, nil
}

// taskCache keeps encodings of tasks (the answers of GET /tasks/{id} and
// those of [Service.EncodedTask]), each with the revision of the task it
// was read at (see [TaskRevisioner]). A read asks for the task's revision,
// one column, and is answered from the cache when the revision is the one
// kept; otherwise the whole task is read and encoded, and kept. An
// encoding depends on nothing but the task's row and the Service's
// configuration (its available actions included), so it holds while the
// revision does.
//
// The revision is read before the task: the task read is then at that
// revision or later, so a kept answer is never older than its revision
// says, and a task that changes after it is read again.
type taskCache struct {
	revs  TaskRevisioner
	limit int64 // bytes of answers, IDs and entries kept at most

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

// encodedTask is one encoding of a task: its form's name, its bytes.
type encodedTask struct {
	form string
	b    []byte
}

// size is what e's encodings cost.
func (e *cachedTask) size() int64 {
	var n int64
	for _, f := range e.forms {
		n += int64(len(f.form) + len(f.b))
	}
	return n
}

// maxForms bounds the encodings kept per task.
const maxForms = 8

// entryOverhead is what an entry costs besides its answers and ID: the
// struct, the map slot, the slice headers.
const entryOverhead = 128

// newTaskCache returns a cache of limit bytes over the Store's revisions,
// or nil when the Store has none (revs is nil) or limit is negative.
func newTaskCache(revs TaskRevisioner, limit int64) *taskCache {
	if revs == nil || limit < 0 {
		return nil
	}
	return &taskCache{revs: revs, limit: limit, byID: make(map[string]*cachedTask)}
}

// revision reads the revision of a task, translating a missing task to
// the API's not_found.
func (c *taskCache) revision(ctx context.Context, id string) (int64, error) {
	rev, err := c.revs.TaskRevision(ctx, id)
	if errors.Is(err, ErrNotFound) {
		c.forget(id)
		return 0, notFound("task", id)
	}
	if err != nil {
		return 0, fmt.Errorf("get task %s: %w", id, err)
	}
	return rev, nil
}

// get returns the encoding of form kept for the task at rev, or nil.
func (c *taskCache) get(id string, rev int64, form string) []byte {
	c.mu.RLock()
	e := c.byID[id]
	c.mu.RUnlock()
	if e == nil || e.rev != rev {
		return nil
	}
	for _, f := range e.forms {
		if f.form == form {
			return f.b
		}
	}
	return nil
}

// put keeps the encoding b of form for the task at rev, unless an
// encoding at a later revision is kept, the task has maxForms already, or
// b is too large to be worth a slot (an eighth of the cache). It evicts
// tasks at random until the cache fits.
func (c *taskCache) put(id string, rev int64, form string, b []byte) {
	cost := int64(len(form) + len(b))
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
		for _, f := range old.forms {
			if f.form == form {
				return // kept meanwhile
			}
		}
		if len(old.forms) == maxForms {
			return
		}
		e.forms = append(make([]encodedTask, 0, len(old.forms)+1), old.forms...)
	default:
		cost -= old.size()
	}
	e.forms = append(e.forms, encodedTask{form, b})
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

// forget drops the entry of a task that is gone.
func (c *taskCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.byID[id]; e != nil {
		c.drop(id, e)
	}
}

// drop removes an entry; c.mu is held.
func (c *taskCache) drop(id string, e *cachedTask) {
	delete(c.byID, id)
	c.size -= int64(len(id)) + entryOverhead + e.size()
}
