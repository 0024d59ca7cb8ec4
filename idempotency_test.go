package lifecycle_test

import (
	"bytes"
	"context"
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
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	first := e.Submit(id, "replay-key-1", apitest.SubmitBody())
	if first.Code != http.StatusAccepted || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first submit = %d, replayed %q", first.Code, first.Header().Get("Idempotent-Replayed"))
	}
	e.Clock.Advance(time.Hour)
	// The same body with members reordered and other whitespace is the same request.
	reordered := `{ "notes": "The old code dropped the query string.",
		"checks": [{"status": "passed", "name": "unit"}, {"name": "lint", "status": "skipped"}],
		"pullRequest": {"reviewers": ["octocat", "hubot"], "draft": false, "body": "Keeps the query string.", "title": "Fix login redirect"},
		"summary": "Fixed the redirect and added a regression test." }`
	for _, body := range []any{apitest.SubmitBody(), reordered} {
		again := e.Submit(id, "replay-key-1", body)
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
	other := e.Submit(id, "replay-key-1", withMember(apitest.SubmitBody(), "summary", "something else"))
	if other.Code != http.StatusConflict || !strings.Contains(other.Body.String(), `"idempotency_key_reused"`) ||
		!strings.Contains(other.Body.String(), `"availableActions":["view_ci_status","view_review_feedback"]`) {
		t.Errorf("key reused with another body = %d %s", other.Code, other.Body)
	}
}

func TestIdempotencyKeyScopedToPrincipal(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	one, two := e.startedTask("ENG-1"), e.startedTask("ENG-2")
	other := e.Key(lifecycle.ScopeTasksWrite)
	e.SubmitOK(one, "shared-key-1", apitest.SubmitBody())
	// Another task under the same key is another key.
	e.SubmitOK(two, "shared-key-1", apitest.SubmitBody())
	// Another principal's identical request executes (and conflicts: the task is in review).
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + one + "/submit", Key: other, Body: apitest.SubmitBody(), Header: http.Header{"Idempotency-Key": {"shared-key-1"}}})
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
	e.SubmitOK(id, "expiring-key", apitest.SubmitBody())
	e.Clock.Advance(24*time.Hour - time.Millisecond)
	if rec := e.Submit(id, "expiring-key", apitest.SubmitBody()); rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("within retention: %d, replayed %q", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
	e.Clock.Advance(time.Millisecond)
	// Forgotten: the request runs again, and conflicts with the task's state.
	if rec := e.Submit(id, "expiring-key", apitest.SubmitBody()); rec.Code != http.StatusConflict || rec.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("after retention: %d, replayed %q; want a fresh 409", rec.Code, rec.Header().Get("Idempotent-Replayed"))
	}
}

func TestFailedRequestsAreNotRecorded(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string) // todo: submit conflicts
	if rec := e.Submit(id, "not-kept-key", apitest.SubmitBody()); rec.Code != http.StatusConflict {
		t.Fatalf("submit on todo = %d", rec.Code)
	}
	if rec := e.Submit(id, "not-kept-key", map[string]any{"summary": ""}); rec.Code != http.StatusBadRequest {
		t.Fatalf("invalid submit = %d", rec.Code)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	// Neither failure kept the key: it now runs, with a different body even.
	e.SubmitOK(id, "not-kept-key", apitest.SubmitBody())
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
		req := apitest.Request{Method: "POST", Path: "/tasks/" + id + "/submit", Key: e.Admin, Body: apitest.SubmitBody()}
		if tt.key != "" {
			req.Header = http.Header{"Idempotency-Key": {tt.key}}
		}
		resp := e.Call(req, tt.status)
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
			rec := e.Submit(id, "same-key-for-all", apitest.SubmitBody())
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
	for _, ev := range e.EventsOf(id) {
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
	go func() { dead <- e.Submit(id, "dead-key-123", apitest.SubmitBody()).Code }()
	<-hang.entered

	// A second process on the same database.
	live := memory.New(memory.Config{})
	other, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock,
		Adapters: []lifecycle.AdapterBinding{{Adapter: live}}, ProviderTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	call := func() *httptest.ResponseRecorder { return e.submitTo(other.Handler(), id, "dead-key-123") }
	if rec := call(); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "request_in_progress") {
		t.Fatalf("while the key is held: %d %s, want 409 request_in_progress", rec.Code, rec.Body)
	}
	e.Clock.Advance(time.Hour + 30*time.Second) // the lease: provider timeout + 30 s
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

// onceHanging hangs in its first EnsurePullRequest until released; later
// calls go through.
type onceHanging struct {
	*memory.Adapter
	entered, release chan struct{}
	once             sync.Once
}

func (h *onceHanging) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	hang := false
	h.once.Do(func() { hang = true })
	if hang {
		close(h.entered)
		select {
		case <-h.release:
		case <-ctx.Done():
			return lifecycle.PullRequest{}, ctx.Err()
		}
	}
	return h.Adapter.EnsurePullRequest(ctx, req)
}

// Requests wait for the task's lock before they reserve their key, so a
// wait longer than a reservation's lease cannot let a second request with
// the same key run beside the first: of two same-key submits queued behind
// a slow one, one submits and the other replays its answer or is told the
// key is in use.
func TestKeyReservedOnlyOnceTheTaskIsFree(t *testing.T) {
	t.Parallel()
	hang := &onceHanging{Adapter: memory.New(memory.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: hang}}
		c.ProviderTimeout = time.Minute
	})
	id := e.startedTask("ENG-1")
	slow := make(chan int)
	go func() { slow <- e.Submit(id, "slow-key-123", apitest.SubmitBody()).Code }()
	<-hang.entered

	codes := make(chan *httptest.ResponseRecorder, 2)
	for range 2 {
		go func() {
			codes <- e.Submit(id, "same-key-123", withMember(apitest.SubmitBody(), "summary", "Second try"))
		}()
	}
	apitest.WaitFor(t, func() bool { return e.Svc.TaskLockHoldersForTest(id) == 3 }) // the slow submit holds the lock, two wait for it
	e.Clock.Advance(2 * time.Hour)                                                   // far past any reservation's lease
	close(hang.release)
	if code := <-slow; code != http.StatusAccepted {
		t.Fatalf("slow submit = %d", code)
	}
	var accepted, replayed, refused int
	for range 2 {
		rec := <-codes
		switch {
		case rec.Code == http.StatusAccepted && rec.Header().Get("Idempotent-Replayed") == "true":
			replayed++
		case rec.Code == http.StatusAccepted:
			accepted++
		case rec.Code == http.StatusConflict:
			refused++ // the task is in review now, or the key is in use
		default:
			t.Errorf("same-key submit = %d %s", rec.Code, rec.Body)
		}
	}
	if accepted > 1 {
		t.Errorf("%d same-key submits ran, want at most one", accepted)
	}
	if n := hang.Calls(memory.OpEnsure); n > 1 {
		t.Errorf("the adapter was asked %d times past the slow call, want at most once", n)
	}
}

// A call waiting for a task's lock gives up when its context ends.
func TestSubmitHonoursItsContextWhileWaiting(t *testing.T) {
	t.Parallel()
	hang := &onceHanging{Adapter: memory.New(memory.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(c *lifecycle.Config) { c.Adapters = []lifecycle.AdapterBinding{{Adapter: hang}} })
	id := e.startedTask("ENG-1")
	go e.Svc.Submit(t.Context(), id, lifecycle.SubmitParams{Summary: "first"})
	<-hang.entered
	defer close(hang.release)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Svc.Submit(ctx, id, lifecycle.SubmitParams{Summary: "second"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Submit behind a held lock = %v, want context.DeadlineExceeded", err)
	}
	// Ignoring its context, the call would wait for the held lock, which
	// the test keeps until it ends: the bound is far from both.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Submit returned after %s, want about 50 ms", d)
	}
}

// The Go API keeps the HTTP API's idempotency rules: the same key and
// parameters return the first result without a second execution; the same
// key with other parameters is a conflict.
func TestGoAPIIdempotency(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	p := lifecycle.SubmitParams{Summary: "Done.", IdempotencyKey: "go-key-1234", Actor: lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}}
	first, err := e.Svc.Submit(t.Context(), id, p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Svc.Submit(t.Context(), id, p)
	if err != nil {
		t.Fatalf("retry with the same key: %v", err)
	}
	if again.SubmissionID != first.SubmissionID || a.web.Calls(memory.OpEnsure) != 1 {
		t.Errorf("retry gave submission %s (first %s) after %d adapter calls, want the first and one call", again.SubmissionID, first.SubmissionID, a.web.Calls(memory.OpEnsure))
	}
	p.Summary = "Something else."
	var ce *lifecycle.ConflictError
	if _, err := e.Svc.Submit(t.Context(), id, p); !errors.As(err, &ce) || ce.Reason != "idempotency_key_reused" {
		t.Errorf("same key, other parameters = %v, want idempotency_key_reused", err)
	}
	p.IdempotencyKey = "short"
	if _, err := e.Svc.Submit(t.Context(), id, p); !errors.Is(err, lifecycle.ErrValidation) {
		t.Errorf("a malformed key = %v, want a validation error", err)
	}
}

// A submit whose task changed while its pull request was prepared says
// what changed, rather than "Task X is in_progress; submit needs status
// in_progress".
func TestSubmitRacingAChangeSaysWhatChanged(t *testing.T) {
	t.Parallel()
	hang := &onceHanging{Adapter: memory.New(memory.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(c *lifecycle.Config) { c.Adapters = []lifecycle.AdapterBinding{{Adapter: hang}} })
	id := e.startedTask("ENG-1")
	answer := make(chan *httptest.ResponseRecorder)
	go func() { answer <- e.Submit(id, "race-key-123", apitest.SubmitBody()) }()
	<-hang.entered
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: e.Admin}, http.StatusOK)
	close(hang.release)
	rec := <-answer
	if rec.Code != http.StatusConflict {
		t.Fatalf("submit after the task changed = %d %s, want 409", rec.Code, rec.Body)
	}
	obj := apitest.Decode(t, rec)["error"].(map[string]any)
	msg := obj["message"].(string)
	if obj["details"].(map[string]any)["reason"] != "task_changed" || !strings.Contains(msg, "cancelled") || !strings.Contains(msg, "changed") {
		t.Errorf("conflict = %v, want reason task_changed and a message naming the change", obj)
	}
}

// Ship and CreateSubscription of the Go API keep the idempotency rules too.
func TestGoAPIIdempotencyOfShipAndSubscriptions(t *testing.T) {
	t.Parallel()
	e, a, _ := newShipEnv(t, func(c *lifecycle.Config) { c.WebhookResolver = fakeResolver{"hooks.example.com": "93.184.216.34"} })
	id, sha := e.shippableTask("ENG-1")
	p := lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging, ExpectedHeadSHA: sha, IdempotencyKey: "go-ship-123"}
	first, err := e.Svc.Ship(t.Context(), id, p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Svc.Ship(t.Context(), id, p)
	if err != nil || again.OperationID != first.OperationID {
		t.Fatalf("retried Ship = %s, %v; want the first operation %s", again.OperationID, err, first.OperationID)
	}
	e.waitShip(first.OperationID)
	if n := a.web.Calls(memory.OpMerge); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
	sp := lifecycle.CreateSubscriptionParams{URL: "https://hooks.example.com/x", EventTypes: []lifecycle.EventType{lifecycle.EventTaskShipped},
		Secret: "a-secret-of-16-chars-or-more", IdempotencyKey: "go-sub-1234"}
	s1, err := e.Svc.CreateSubscription(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := e.Svc.CreateSubscription(t.Context(), sp)
	if err != nil || s2.ID != s1.ID {
		t.Errorf("retried CreateSubscription = %s, %v; want %s", s2.ID, err, s1.ID)
	}
	sp.Secret = "another-secret-of-16-chars"
	var ce *lifecycle.ConflictError
	if _, err := e.Svc.CreateSubscription(t.Context(), sp); !errors.As(err, &ce) || ce.Reason != "idempotency_key_reused" {
		t.Errorf("same key, other parameters = %v, want idempotency_key_reused", err)
	}
}
