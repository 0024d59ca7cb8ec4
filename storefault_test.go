package lifecycle_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// These tests cover a Store that fails (issue 21): requests answer 503
// store_unavailable with Retry-After, never 500 nor a hang past their
// deadline, /readyz says so, and background work goes on by itself
// within seconds of the Store's return.

// errStoreDown is what a flakyStore returns while it is down.
var errStoreDown = errors.New("flaky store: the database does not answer")

// flakyStore is a Store that can be taken down (every call fails with
// errStoreDown, which it classifies as unavailable) or made to hang (every
// call waits until its context ends), as a database that restarts, or
// that answers no more, does.
type flakyStore struct {
	lifecycle.Store
	down, hang atomic.Bool
	// lostCommit makes Update commit and then fail with errStoreDown, as
	// a database whose connection breaks while it commits.
	lostCommit atomic.Bool
	calls      atomic.Int64 // calls made, down or not
}

var (
	_ lifecycle.FailureClassifier = (*flakyStore)(nil)
	_ lifecycle.InstanceLeaser    = (*flakyStore)(nil)
)

// Unavailable implements lifecycle.FailureClassifier.
func (f *flakyStore) Unavailable(err error) bool { return errors.Is(err, errStoreDown) }

// fault returns the error of a call made now.
func (f *flakyStore) fault(ctx context.Context) error {
	f.calls.Add(1)
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.down.Load() {
		return errStoreDown
	}
	return nil
}

func (f *flakyStore) Update(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	if err := f.fault(ctx); err != nil {
		return err
	}
	err := f.Store.Update(ctx, fn)
	if err == nil && f.lostCommit.Load() {
		return errStoreDown
	}
	return err
}

func (f *flakyStore) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	if err := f.fault(ctx); err != nil {
		return lifecycle.Task{}, err
	}
	return f.Store.Task(ctx, id)
}

func (f *flakyStore) ListTasks(ctx context.Context, flt lifecycle.TaskFilter) (lifecycle.TaskPage, error) {
	if err := f.fault(ctx); err != nil {
		return lifecycle.TaskPage{}, err
	}
	return f.Store.ListTasks(ctx, flt)
}

func (f *flakyStore) Events(ctx context.Context, flt lifecycle.EventFilter) ([]lifecycle.Event, error) {
	if err := f.fault(ctx); err != nil {
		return nil, err
	}
	return f.Store.Events(ctx, flt)
}

func (f *flakyStore) EventBounds(ctx context.Context) (lifecycle.EventBounds, error) {
	if err := f.fault(ctx); err != nil {
		return lifecycle.EventBounds{}, err
	}
	return f.Store.EventBounds(ctx)
}

// UpdateInstanceLease implements lifecycle.InstanceLeaser with the
// wrapped Store's, so that the instance lease fails with the rest.
func (f *flakyStore) UpdateInstanceLease(ctx context.Context, p lifecycle.UpdateInstanceLeaseParams) error {
	if err := f.fault(ctx); err != nil {
		return err
	}
	return f.Store.(lifecycle.InstanceLeaser).UpdateInstanceLease(ctx, p)
}

func (f *flakyStore) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	if err := f.fault(ctx); err != nil {
		return lifecycle.ShipOperation{}, err
	}
	return f.Store.ShipOperation(ctx, id)
}

func (f *flakyStore) Deliveries(ctx context.Context, flt lifecycle.DeliveryFilter) (lifecycle.DeliveryPage, error) {
	if err := f.fault(ctx); err != nil {
		return lifecycle.DeliveryPage{}, err
	}
	return f.Store.Deliveries(ctx, flt)
}

// tick moves clock a second and waits until the Service has called the
// Store since: its loops, which poll every second, woke at the new time
// and met the Store, down or up.
func (f *flakyStore) tick(t *testing.T, clock *fakeclock.Clock) {
	t.Helper()
	before := f.calls.Load()
	clock.Advance(time.Second)
	testenv.WaitFor(t, 5*time.Second, "the Service to call the Store after the clock moved", func() bool { return f.calls.Load() > before })
}

// withFlakyStore puts a flakyStore in front of an env's Store.
func withFlakyStore(f **flakyStore) func(*lifecycle.Config) {
	return func(c *lifecycle.Config) {
		*f = &flakyStore{Store: c.Store}
		c.Store = *f
	}
}

// While the Store is down every request that needs it gets 503
// store_unavailable with Retry-After, /readyz says the store is
// unavailable and /healthz that the process lives; once it is back,
// everything answers again.
func TestStoreUnavailableAnswers503(t *testing.T) {
	t.Parallel()
	var store *flakyStore
	e := newEnv(t, withFlakyStore(&store))
	e.Start()
	id := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)

	store.down.Store(true)
	for _, r := range []apitest.Request{
		{Method: "GET", Path: "/tasks/" + id, Key: e.Admin},
		{Method: "GET", Path: "/tasks", Key: e.Admin},
		{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-2")},
		{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin},
	} {
		rec := e.Do(r)
		if rec.Code != http.StatusServiceUnavailable || apitest.ErrorCode(apitest.Decode(t, rec)) != "store_unavailable" || rec.Header().Get("Retry-After") != "2" {
			t.Errorf("%s %s with the store down = %d %s (Retry-After %q); want 503 store_unavailable, Retry-After 2",
				r.Method, r.Path, rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
	}
	rec := e.Do(apitest.Request{Method: "GET", Path: "/readyz"})
	ready := apitest.Decode(t, rec)
	if rec.Code != http.StatusServiceUnavailable || ready["status"] != "not_ready" || ready["checks"].(map[string]any)["store"] != "unavailable" {
		t.Errorf("GET /readyz with the store down = %d %s; want 503 not_ready, store unavailable", rec.Code, rec.Body)
	}
	if rec := e.Do(apitest.Request{Method: "GET", Path: "/healthz"}); rec.Code != http.StatusOK {
		t.Errorf("GET /healthz with the store down = %d, want 200: the process lives", rec.Code)
	}

	store.down.Store(false)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-2")}, http.StatusCreated)
	if got := e.Call(apitest.Request{Method: "GET", Path: "/readyz"}, http.StatusOK); got["status"] != "ready" || got["checks"].(map[string]any)["instanceLease"] != "held" {
		t.Errorf("GET /readyz once the store is back = %v, want ready with the lease held", got)
	}
}

// A Store that does not answer makes a request 503 at its deadline
// (Config.RequestTimeout), not a request that hangs.
func TestStoreHangingEndsAtTheRequestDeadline(t *testing.T) {
	t.Parallel()
	var store *flakyStore
	const deadline = 200 * time.Millisecond
	e := newEnv(t, withFlakyStore(&store), func(c *lifecycle.Config) { c.RequestTimeout = deadline })
	id := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	store.hang.Store(true)
	start := time.Now()
	rec := e.Do(apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: e.Admin})
	if took := time.Since(start); took > 10*deadline {
		t.Errorf("the request took %s with a deadline of %s", took, deadline)
	}
	if rec.Code != http.StatusServiceUnavailable || apitest.ErrorCode(apitest.Decode(t, rec)) != "store_unavailable" {
		t.Errorf("GET with the store hanging = %d %s, want 503 store_unavailable", rec.Code, rec.Body)
	}
}

// A ship operation and the deliveries of its events, caught by a Store
// outage, go on by themselves within 5 s (on the Service's clock) of the
// Store's return: the merge is made once, and the subscriber gets every
// event.
func TestWorkResumesAfterAStoreOutage(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	var store *flakyStore
	host := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	e := newHookEnv(t, rc, withFlakyStore(&store), func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: host}}
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	e.Subscribe(subBody(rc.url("/hook")))
	id, sha := e.submittedTask("ENG-1")
	e.reportCI(id, sha)
	opID := shipOpID(t, e.ship(id, "ship-during-outage", apitest.ShipBody("merge_only", "staging", sha)))
	store.down.Store(true)
	for range 10 { // ten seconds of outage, on the Service's clock
		store.tick(t, e.Clock)
	}
	store.down.Store(false)
	var op lifecycle.ShipOperation
	finished := func() bool {
		var err error
		op, err = e.Store.ShipOperation(t.Context(), opID)
		if err != nil {
			t.Fatal(err)
		}
		return op.Status == lifecycle.ShipSucceeded || op.Status == lifecycle.ShipFailed
	}
	// Five seconds of the Service's clock, then the clock stands still:
	// the operation must finish without more of it.
	for i := 0; i < 5 && !finished(); i++ {
		store.tick(t, e.Clock)
	}
	testenv.WaitFor(t, 10*time.Second, "the operation to finish within 5 s (on the Service's clock) of the store's return", finished)
	if op.Status != lifecycle.ShipSucceeded || host.Calls(memory.OpMerge) != 1 {
		t.Fatalf("operation %s (%+v), %d merges; want succeeded, merged once", op.Status, op.Error, host.Calls(memory.OpMerge))
	}
	// Every event of the task reaches the subscriber, the ship's too.
	want := map[string]bool{}
	for _, ev := range e.EventsOf(id) {
		want[ev["id"].(string)] = true
	}
	for len(want) > 0 {
		select {
		case d := <-rc.Got():
			delete(want, d.EventID())
		case <-time.After(5 * time.Second):
			t.Fatalf("%d events of the task never delivered after the outage", len(want))
		}
	}
}

// downDuringSubmit is a code host during whose EnsurePullRequest the
// Store goes down, as a database restarting in the middle of a submit:
// the submit's own write then fails.
type downDuringSubmit struct {
	*memory.Adapter
	store **flakyStore
}

func (d downDuringSubmit) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	(*d.store).down.Store(true)
	return d.Adapter.EnsurePullRequest(ctx, req)
}

// A submit that the Store's failure cut off (503) frees its
// Idempotency-Key within seconds of the Store's return, so that its retry
// runs on another replica too; before, the key stayed reserved until its
// lease ended (ProviderTimeout plus 30 s), and the retry answered 409
// request_in_progress meanwhile.
func TestKeyOfARequestCutOffByTheStoreIsFreedOnItsReturn(t *testing.T) {
	t.Parallel()
	var store *flakyStore
	e := newEnv(t, withFlakyStore(&store), func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: downDuringSubmit{Adapter: memory.New(memory.Config{}), store: &store}}}
	})
	e.Start()
	id := e.startedTask("ENG-1")
	rec := e.Submit(id, "cut-off-key-1", apitest.SubmitBody())
	if rec.Code != http.StatusServiceUnavailable || apitest.ErrorCode(apitest.Decode(t, rec)) != "store_unavailable" {
		t.Fatalf("submit with the store going down = %d %s, want 503 store_unavailable", rec.Code, rec.Body)
	}
	store.down.Store(false)

	// Another replica on the same database gets the retry.
	other, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger(),
		Adapters: []lifecycle.AdapterBinding{{Adapter: memory.New(memory.Config{})}}})
	if err != nil {
		t.Fatal(err)
	}
	retry := func() *httptest.ResponseRecorder { return e.submitTo(other.Handler(), id, "cut-off-key-1") }
	freed := func() bool {
		rec := retry()
		if rec.Code != http.StatusAccepted && (rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "request_in_progress")) {
			t.Fatalf("the retry on another replica = %d %s, want 202 (or 409 request_in_progress for a moment)", rec.Code, rec.Body)
		}
		return rec.Code == http.StatusAccepted
	}
	// Five seconds of the Service's clock, then the clock stands still:
	// the key must be freed without more of it.
	for i := 0; i < 5 && !freed(); i++ {
		store.tick(t, e.Clock)
	}
	testenv.WaitFor(t, 10*time.Second, "the key to be freed within 5 s (on the Service's clock) of the store's return", freed)
}

// A Store whose connection breaks while it commits may have committed, so
// a 503 store_unavailable does not say that nothing was changed: the crash
// harness saw a create answered 503 during a PostgreSQL restart whose
// retry found the task made.
func TestUnavailableAnswerDoesNotSayNothingChanged(t *testing.T) {
	t.Parallel()
	var store *flakyStore
	e := newEnv(t, withFlakyStore(&store))
	store.lostCommit.Store(true)
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1")})
	store.lostCommit.Store(false)
	body := apitest.Decode(t, rec)
	if rec.Code != http.StatusServiceUnavailable || apitest.ErrorCode(body) != "store_unavailable" {
		t.Fatalf("POST /tasks with the commit lost = %d %s, want 503 store_unavailable", rec.Code, rec.Body)
	}
	if msg := body["error"].(map[string]any)["message"].(string); strings.Contains(msg, "nothing was changed") {
		t.Errorf("the 503 says %q, but the task was made", msg)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1")}, http.StatusConflict)
}
