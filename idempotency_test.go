package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
)

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	first := e.submit(id, "replay-key-1", submitBody())
	if first.Code != http.StatusAccepted || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first submit = %d, replayed %q", first.Code, first.Header().Get("Idempotent-Replayed"))
	}
	e.clock.Advance(time.Hour)
	// The same body with members reordered and other whitespace is the same request.
	reordered := `{ "notes": "The old code dropped the query string.",
		"checks": [{"status": "passed", "name": "unit"}, {"name": "lint", "status": "skipped"}],
		"pullRequest": {"reviewers": ["octocat", "hubot"], "draft": false, "body": "Keeps the query string.", "title": "Fix login redirect"},
		"summary": "Fixed the redirect and added a regression test." }`
	for _, body := range []any{submitBody(), reordered} {
		again := e.submit(id, "replay-key-1", body)
		if again.Code != http.StatusAccepted || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay = %d, Idempotent-Replayed %q; want 202, true", again.Code, again.Header().Get("Idempotent-Replayed"))
		}
		if !bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) {
			t.Errorf("replayed body differs:\n%s\nfirst:\n%s", again.Body, first.Body)
		}
		if again.Header().Get("Content-Type") != "application/json" {
			t.Errorf("replay Content-Type = %q", again.Header().Get("Content-Type"))
		}
	}
	if n := a.web.Calls(memory.OpEnsure); n != 1 {
		t.Errorf("adapter asked %d times, want once", n)
	}

	// The same key with another body is refused, with the next steps.
	other := e.submit(id, "replay-key-1", withMember(submitBody(), "summary", "something else"))
	if other.Code != http.StatusConflict || !strings.Contains(other.Body.String(), `"idempotency_key_reused"`) ||
		!strings.Contains(other.Body.String(), `"availableActions":["view_ci_status","view_review_feedback"]`) {
		t.Errorf("key reused with another body = %d %s", other.Code, other.Body)
	}
}

func TestIdempotencyKeyScopedToPrincipal(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	one, two := e.startedTask("ENG-1"), e.startedTask("ENG-2")
	other := e.key(lifecycle.ScopeTasksWrite)
	e.submitOK(one, "shared-key-1", submitBody())
	// Another task under the same key is another key.
	e.submitOK(two, "shared-key-1", submitBody())
	// Another principal's identical request executes (and conflicts: the task is in review).
	rec := e.do(request{method: "POST", path: "/tasks/" + one + "/submit", key: other, body: submitBody(), header: http.Header{"Idempotency-Key": {"shared-key-1"}}})
	if rec.Code != http.StatusConflict || rec.Header().Get("Idempotent-Replayed") != "" || !strings.Contains(rec.Body.String(), "already_in_review") {
		t.Errorf("another principal's request = %d %s, want it executed (409 already_in_review)", rec.Code, rec.Body)
	}
	if n := a.web.Calls(memory.OpEnsure); n != 2 {
		t.Errorf("adapter asked %d times, want 2", n)
	}
}

func TestIdempotencyRecordsExpire(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) { c.IdempotencyRetention = 24 * time.Hour })
	id := e.startedTask("ENG-1")
	e.submitOK(id, "expiring-key", submitBody())
	e.clock.Advance(24*time.Hour - time.Millisecond)
	if rec := e.submit(id, "expiring-key", submitBody()); rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("within retention: %d, replayed %q", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
	e.clock.Advance(time.Millisecond)
	// Forgotten: the request runs again, and conflicts with the task's state.
	if rec := e.submit(id, "expiring-key", submitBody()); rec.Code != http.StatusConflict || rec.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("after retention: %d, replayed %q; want a fresh 409", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
}

func TestFailedRequestsAreNotRecorded(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.createTask(taskBody("ENG-1"))["id"].(string) // todo: submit conflicts
	if rec := e.submit(id, "not-kept-key", submitBody()); rec.Code != http.StatusConflict {
		t.Fatalf("submit on todo = %d", rec.Code)
	}
	if rec := e.submit(id, "not-kept-key", map[string]any{"summary": ""}); rec.Code != http.StatusBadRequest {
		t.Fatalf("invalid submit = %d", rec.Code)
	}
	e.call(request{method: "POST", path: "/tasks/" + id + "/start", key: e.admin}, http.StatusOK)
	// Neither failure kept the key: it now runs, with a different body even.
	e.submitOK(id, "not-kept-key", submitBody())
}

func TestIdempotencyKeyLimits(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	tests := []struct {
		key    string
		status int
	}{
		{strings.Repeat("k", 7), http.StatusBadRequest},
		{strings.Repeat("k", 8), http.StatusAccepted},
		{strings.Repeat("k", 128), http.StatusAccepted},
		{strings.Repeat("k", 129), http.StatusBadRequest},
		{"has space in it", http.StatusBadRequest},
		{"", http.StatusBadRequest},
	}
	for i, tt := range tests {
		id := e.startedTask(fmt.Sprintf("KEY-%d", i))
		req := request{method: "POST", path: "/tasks/" + id + "/submit", key: e.admin, body: submitBody()}
		if tt.key != "" {
			req.header = http.Header{"Idempotency-Key": {tt.key}}
		}
		resp := e.call(req, tt.status)
		if tt.status == http.StatusBadRequest && !hasFieldError(resp["error"].(map[string]any), "Idempotency-Key") {
			t.Errorf("key %q: details.fields does not name Idempotency-Key: %v", tt.key, resp)
		}
	}
}

// Fifty clients send the same submit with the same key at once: one
// submission, one adapter call, and every answer the same 202 or a 409.
func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	const clients = 50
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		bodies = map[string]int{}
		codes  = map[int]int{}
	)
	start := make(chan struct{})
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rec := e.submit(id, "same-key-for-all", submitBody())
			mu.Lock()
			defer mu.Unlock()
			codes[rec.Code]++
			if rec.Code == http.StatusAccepted {
				bodies[rec.Body.String()]++
			} else if !strings.Contains(rec.Body.String(), `"code":"conflict"`) {
				t.Errorf("non-202 answer %d: %s", rec.Code, rec.Body)
			}
		}()
	}
	close(start)
	wg.Wait()
	if codes[http.StatusAccepted]+codes[http.StatusConflict] != clients {
		t.Errorf("status codes %v: want only 202 and 409", codes)
	}
	if len(bodies) != 1 {
		t.Errorf("%d different 202 bodies, want 1", len(bodies))
	}
	if n := a.web.Calls(memory.OpEnsure); n != 1 {
		t.Errorf("adapter asked %d times, want once", n)
	}
	subs := 0
	for _, ev := range e.eventsOf(id) {
		if ev["data"].(map[string]any)["status"] == "in_review" {
			subs++
		}
	}
	if subs != 1 {
		t.Errorf("%d submissions accepted, want 1", subs)
	}
}

// hangingAdapter hangs in EnsurePullRequest until released: the process
// that called it is as good as dead.
type hangingAdapter struct {
	*memory.Adapter
	entered, release chan struct{}
}

func (h *hangingAdapter) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	close(h.entered)
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return lifecycle.PullRequest{}, errors.New("process died")
}

// A request that died holding its key frees the key when its lease ends;
// until then the key answers request_in_progress.
func TestKeyOfADeadRequestIsTakenOver(t *testing.T) {
	t.Parallel()
	hang := &hangingAdapter{Adapter: memory.New(memory.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: hang}}
		c.ProviderTimeout = time.Hour // only the fake clock ends the lease
	})
	id := e.startedTask("ENG-1")
	dead := make(chan int)
	go func() { dead <- e.submit(id, "dead-key-123", submitBody()).Code }()
	<-hang.entered

	// A second process on the same database.
	live := memory.New(memory.Config{})
	other, err := lifecycle.New(lifecycle.Config{Store: e.store, BaseURL: testBase, Clock: e.clock,
		Adapters: []lifecycle.AdapterBinding{{Adapter: live}}, ProviderTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	call := func() *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/tasks/"+id+"/submit", strings.NewReader(mustJSON(submitBody())))
		req.Header.Set("Authorization", "Bearer "+e.admin)
		req.Header.Set("Idempotency-Key", "dead-key-123")
		rec := httptest.NewRecorder()
		other.Handler().ServeHTTP(rec, req)
		return rec
	}
	if rec := call(); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "request_in_progress") {
		t.Fatalf("while the key is held: %d %s, want 409 request_in_progress", rec.Code, rec.Body)
	}
	e.clock.Advance(time.Hour + 30*time.Second) // the lease: provider timeout + 30 s
	if rec := call(); rec.Code != http.StatusAccepted {
		t.Fatalf("after the lease: %d %s, want 202", rec.Code, rec.Body)
	}
	close(hang.release)
	if code := <-dead; code != http.StatusBadGateway {
		t.Errorf("the dead request answered %d, want 502", code)
	}
	// The key now replays the second process's answer.
	if rec := call(); rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("afterwards: %d, replayed %q", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
