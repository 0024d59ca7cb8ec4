package taskcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// TestTaskCacheBoundsAndOrder: the cache stays within its bytes, keeps
// no encoding older than one it holds, keeps several forms of a revision
// (up to maxForms) and drops them all at the next.
func TestTaskCacheBoundsAndOrder(t *testing.T) {
	t.Parallel()
	enc := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	const std, cpt = "s", "c"
	c := &Cache{limit: 10_000, byID: map[string]*cachedTask{}}
	c.Put("tsk_a", 2, std, "", enc(100))
	c.Put("tsk_a", 1, std, "", enc(50)) // older: not kept
	if got := get(c, "tsk_a", 2, std); len(got) != 100 {
		t.Fatalf("revision 2 = %d bytes, want 100", len(got))
	}
	if got := get(c, "tsk_a", 1, std); got != nil {
		t.Fatal("an older revision replaced a later one")
	}
	c.Put("tsk_a", 2, cpt, "", enc(40))
	c.Put("tsk_a", 2, std, "", enc(70)) // kept already: the first stays
	if s, k := get(c, "tsk_a", 2, std), get(c, "tsk_a", 2, cpt); len(s) != 100 || len(k) != 40 {
		t.Fatalf("both forms at revision 2: %d and %d bytes, want 100 and 40", len(s), len(k))
	}
	for i := range maxForms + 2 {
		c.Put("tsk_a", 2, fmt.Sprint("f", i), "", enc(1))
	}
	if n := len(c.byID["tsk_a"].forms); n != maxForms {
		t.Fatalf("%d forms kept, want %d", n, maxForms)
	}
	c.Put("tsk_a", 3, std, "", enc(60))
	if get(c, "tsk_a", 3, cpt) != nil || len(get(c, "tsk_a", 3, std)) != 60 {
		t.Fatal("revision 3 kept a form of revision 2")
	}
	if want := int64(len(std) + 60 + len("tsk_a") + entryOverhead); c.size != want {
		t.Fatalf("size %d, want %d", c.size, want)
	}
	c.Put("tsk_big", 1, std, "", enc(10_000/8)) // more than an eighth, with its form's name
	if get(c, "tsk_big", 1, std) != nil {
		t.Fatal("an encoding of over an eighth of the cache was kept")
	}
	for i := range 200 {
		c.Put(fmt.Sprintf("tsk_%03d", i), 1, std, "", enc(200))
		if c.size > c.limit {
			t.Fatalf("after %d puts: %d bytes, over %d", i+1, c.size, c.limit)
		}
	}
	var sum int64
	for id, e := range c.byID {
		sum += int64(len(id)) + entryOverhead + e.size()
	}
	if sum != c.size || len(c.byID) < 10_000/(201+7+entryOverhead)-1 {
		t.Fatalf("%d entries of %d bytes, counted %d", len(c.byID), sum, c.size)
	}
	if got := get(c, "tsk_199", 1, std); len(got) != 200 {
		t.Fatal("the encoding put last was evicted")
	}
	c.Forget("tsk_199")
	if get(c, "tsk_199", 1, std) != nil {
		t.Fatal("a forgotten task is still answered")
	}
}

// get is Cache.Get without the condition.
func get(c *Cache, id string, rev int64, form string) []byte {
	b, _ := c.Get(id, rev, form)
	return b
}

// TestTaskCacheCondition: an encoding comes back with the condition it
// was put with, and one put at the same revision under another condition
// replaces it.
func TestTaskCacheCondition(t *testing.T) {
	t.Parallel()
	c := &Cache{limit: 10_000, byID: map[string]*cachedTask{}}
	c.Put("tsk_a", 1, "s", "agent-1 free", []byte("offers start"))
	c.Put("tsk_a", 1, "c", "", []byte("compact"))
	if b, cond := c.Get("tsk_a", 1, "s"); string(b) != "offers start" || cond != "agent-1 free" {
		t.Fatalf("Get = %q, %q", b, cond)
	}
	c.Put("tsk_a", 1, "s", "agent-1 at cap", []byte("no start"))
	if b, cond := c.Get("tsk_a", 1, "s"); string(b) != "no start" || cond != "agent-1 at cap" {
		t.Fatalf("after a put under another condition, Get = %q, %q", b, cond)
	}
	if b, cond := c.Get("tsk_a", 1, "c"); string(b) != "compact" || cond != "" {
		t.Fatalf("the other form: Get = %q, %q", b, cond)
	}
	var want int64 = int64(len("tsk_a")) + entryOverhead + int64(len("s")+len("no start")+len("agent-1 at cap")+len("c")+len("compact"))
	if c.size != want {
		t.Fatalf("size %d, want %d", c.size, want)
	}
}

// revisions is a TaskRevisioner over a map; a missing task is
// ErrNotFound.
type revisions map[string]int64

func (r revisions) TaskRevision(_ context.Context, id string) (int64, error) {
	rev, ok := r[id]
	if !ok {
		return 0, fmt.Errorf("task %s: %w", id, lifecycletype.ErrNotFound)
	}
	return rev, nil
}

// TestTaskCacheRevision: without revisions or with a negative limit there
// is no cache; a revision is the Store's, and a task found gone is
// forgotten, its error passed on.
func TestTaskCacheRevision(t *testing.T) {
	t.Parallel()
	if New(nil, 1000) != nil || New(revisions{}, -1) != nil {
		t.Fatal("a cache without revisions, or with a negative limit")
	}
	revs := revisions{"tsk_a": 7}
	c := New(revs, 10_000)
	if rev, err := c.Revision(context.Background(), "tsk_a"); rev != 7 || err != nil {
		t.Fatalf("Revision = %d, %v; want 7", rev, err)
	}
	c.Put("tsk_a", 7, "s", "", []byte("x"))
	delete(revs, "tsk_a")
	if _, err := c.Revision(context.Background(), "tsk_a"); !errors.Is(err, lifecycletype.ErrNotFound) {
		t.Fatalf("Revision of a task gone = %v, want ErrNotFound", err)
	}
	if get(c, "tsk_a", 7, "s") != nil || c.size != 0 {
		t.Fatalf("a task gone is still kept (%d bytes)", c.size)
	}
}
