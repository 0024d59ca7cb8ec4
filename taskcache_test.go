package lifecycle_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

const taskCacheLookups = "lifecycle.task_cache.lookups"

// TestTaskCacheFollowsTheStore: GET /tasks/{id} answers from the cache
// only while the task's revision holds. A write by another process (here
// straight to the Store), one that changes nothing a client sees, and
// either token budget are each answered as a read of the whole task
// would be.
func TestTaskCacheFollowsTheStore(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e := newEnv(t, withProbe)
	id := e.CreateTask(apitest.TaskBody("CACHE-1"))["id"].(string)
	get := func(query string) string {
		t.Helper()
		rec := e.Do(apitest.Request{Method: "GET", Path: "/tasks/" + id + query, Key: e.Admin})
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /tasks/%s%s = %d %s", id, query, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	hits := func(want int64) {
		t.Helper()
		p.want(taskCacheLookups, map[string]string{"lifecycle.cache.result": "hit"}, want)
	}
	first := get("")
	hits(0)
	if again := get(""); again != first {
		t.Fatalf("read again:\n%s", cmp.Diff(first, again))
	}
	hits(1)
	compact := get("?tokenBudget=compact")
	if compact == first {
		t.Fatal("the compact answer is the standard one")
	}
	if again := get("?tokenBudget=compact"); again != compact {
		t.Fatalf("compact read again:\n%s", cmp.Diff(compact, again))
	}
	hits(2)

	// Another process changes the task: the next read sees it.
	write := func(change func(*lifecycle.Task)) {
		t.Helper()
		err := e.Store.Update(context.Background(), func(tx lifecycle.Tx) error {
			task, err := tx.Task(context.Background(), id)
			if err != nil {
				return err
			}
			change(&task)
			return tx.UpdateTask(context.Background(), task)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write(func(task *lifecycle.Task) { task.Title = "Retitled elsewhere"; task.Version++ })
	changed := get("")
	if changed == first || !strings.Contains(changed, "Retitled elsewhere") {
		t.Fatalf("after a write elsewhere: %s", changed)
	}
	if c := get("?tokenBudget=compact"); !strings.Contains(c, "Retitled elsewhere") {
		t.Fatalf("compact, after a write elsewhere: %s", c)
	}
	hits(2)
	get("")
	hits(3)
	// A write that leaves the version as it was (as the ship runner's mark
	// of a merge under way does) is seen too: the cache follows the row's
	// revision, not the task's version.
	write(func(task *lifecycle.Task) { task.Title = "Quietly retitled" })
	if c := get(""); !strings.Contains(c, "Quietly retitled") {
		t.Fatalf("after a quiet write: %s", c)
	}
	// And a change through the API.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	if c := get(""); !strings.Contains(c, `"status":"in_progress"`) {
		t.Fatalf("after start: %s", c)
	}
	// A missing task is not_found, with or without the cache.
	if rec := e.Do(apitest.Request{Method: "GET", Path: "/tasks/tsk_00000000000000000000000000", Key: e.Admin}); rec.Code != http.StatusNotFound {
		t.Fatalf("a missing task = %d %s", rec.Code, rec.Body)
	}
}

// TestTaskCacheAnswersAsTheStore: with the cache and without it, every
// read of a set of tasks in several states is the same bytes.
func TestTaskCacheAnswersAsTheStore(t *testing.T) {
	t.Parallel()
	cached, _ := newSubmitEnv(t)
	uncached, _ := newSubmitEnv(t, func(c *lifecycle.Config) { c.TaskCacheBytes = -1 })
	for _, e := range []*env{cached, uncached} {
		e.CreateTask(apitest.TaskBody("SAME-1"))
		e.startedTask("SAME-2")
	}
	list := func(e *env) []any {
		return e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: e.Admin}, http.StatusOK)["data"].([]any)
	}
	a, b := list(cached), list(uncached)
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("%d and %d tasks, want 2", len(a), len(b))
	}
	for i := range a {
		for _, query := range []string{"", "?tokenBudget=compact", "?tokenBudget=standard"} {
			for range 2 { // a miss, then a hit
				x := cached.Do(apitest.Request{Method: "GET", Path: "/tasks/" + a[i].(map[string]any)["id"].(string) + query, Key: cached.Admin}).Body.String()
				y := uncached.Do(apitest.Request{Method: "GET", Path: "/tasks/" + b[i].(map[string]any)["id"].(string) + query, Key: uncached.Admin}).Body.String()
				if diff := cmp.Diff(normalizeIDs(y), normalizeIDs(x)); diff != "" {
					t.Errorf("task %d%s, cached vs not (-uncached +cached):\n%s", i, query, diff)
				}
			}
		}
	}
}

// anID is an ID of the API's form: a prefix and a random part.
var anID = regexp.MustCompile(`\b[a-z]{3}_[0-9A-Za-z]{16,}`)

// normalizeIDs replaces the IDs in s, which differ between two Services
// that did the same.
func normalizeIDs(s string) string { return anID.ReplaceAllString(s, "ID") }

// TestEncodedTask: an encoding of another form is made once per revision
// of the task, with or without a cache in front of it, and the Service's
// own forms are refused.
func TestEncodedTask(t *testing.T) {
	t.Parallel()
	for _, cacheBytes := range []int64{0, -1} {
		e := newEnv(t, func(c *lifecycle.Config) { c.TaskCacheBytes = cacheBytes })
		id := e.CreateTask(apitest.TaskBody("ENC-1"))["id"].(string)
		var calls int
		encode := func(task *lifecycle.Task) ([]byte, error) {
			calls++
			return []byte(task.Title + " " + string(task.Status)), nil
		}
		read := func() string {
			t.Helper()
			b, err := e.Svc.EncodedTask(t.Context(), id, "test:title", encode)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		wantCalls := func(cached, uncached int) {
			t.Helper()
			want := cached
			if cacheBytes < 0 {
				want = uncached
			}
			if calls != want {
				t.Fatalf("cache %d: encode called %d times, want %d", cacheBytes, calls, want)
			}
		}
		if got := read(); got != "Fix the login redirect todo" {
			t.Fatalf("EncodedTask = %q", got)
		}
		read()
		wantCalls(1, 2)
		e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
		if got := read(); got != "Fix the login redirect in_progress" {
			t.Fatalf("after start, EncodedTask = %q", got)
		}
		wantCalls(2, 3)
		if _, err := e.Svc.EncodedTask(t.Context(), "tsk_00000000000000000000000000", "test:title", encode); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Fatalf("a missing task: %v, want ErrNotFound", err)
		}
		if _, err := e.Svc.EncodedTask(t.Context(), id, "lifecycle:standard", encode); err == nil {
			t.Fatal("the Service's own form was accepted")
		}
	}
}
