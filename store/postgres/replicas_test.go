package postgres_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/postgres"
)

// receiver is a webhook receiver that counts the deliveries of each event.
type receiver struct {
	mu     sync.Mutex
	events map[string]int // event ID -> deliveries
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.events[req.Header.Get(lifecycle.HeaderEventID)]++
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) count() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps(r.events)
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// replicas are Services sharing one PostgreSQL schema, as replicas of one
// server would, with one code host.
type replicas struct {
	stores []*postgres.Store
	svcs   []*lifecycle.Service
	host   *memory.Adapter
}

// newReplicas starts n Services on one new schema. Their Stores open at
// once, so that the migration lock is exercised.
func newReplicas(t testing.TB, n int, hook *httptest.Server, configure func(*lifecycle.Config)) *replicas {
	t.Helper()
	needServer(t)
	schema := newSchema()
	r := &replicas{stores: make([]*postgres.Store, n), host: memory.New(memory.Config{Owner: "acme", Repo: "web"})}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.stores[i], errs[i] = postgres.New(context.Background(), postgres.Config{DSN: testDB.DSN, Schema: schema, MaxConns: 8})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		t.Cleanup(func() { r.stores[i].Close() })
	}
	for i := range n {
		cfg := lifecycle.Config{
			Store:        r.stores[i],
			BaseURL:      fmt.Sprintf("http://replica-%d.example.com", i),
			InstanceID:   fmt.Sprintf("replica-%d", i),
			Adapters:     []lifecycle.AdapterBinding{{Project: "web", Adapter: r.host}},
			ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}},
			Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
			// Only notifications can make streams, runners and dispatchers
			// timely: polling is slower than the test allows.
			EventPollInterval: time.Minute,
			ShipPollInterval:  time.Minute,
		}
		if hook != nil {
			cfg.AllowPrivateWebhookTargets = true
			cfg.WebhookTLSConfig = &tls.Config{RootCAs: hook.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
		}
		if configure != nil {
			configure(&cfg)
		}
		svc, err := lifecycle.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			svc.Close(ctx)
		})
		r.svcs = append(r.svcs, svc)
	}
	return r
}

var (
	ops      = lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}
	reviewer = lifecycle.Actor{ID: "rev", Role: lifecycle.RoleReviewer}
)

// shipTask takes a new task through the whole lifecycle on svc: create,
// start, submit, report checks, approve and ship. It returns the task's
// and the ship operation's IDs.
func shipTask(ctx context.Context, svc *lifecycle.Service, ident string) (string, string, error) {
	web := "web"
	task, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{
		Identifier: ident, Title: "Fix " + ident, Priority: lifecycle.PriorityMedium,
		AcceptanceCriteria: []string{"works"}, Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident},
		Context: lifecycle.TaskContext{Project: &web, Goal: "ship it"}, Actor: ops,
	})
	if err != nil {
		return "", "", fmt.Errorf("create %s: %w", ident, err)
	}
	if _, err := svc.StartTask(ctx, task.ID, lifecycle.StartTaskParams{Actor: ops}); err != nil {
		return "", "", fmt.Errorf("start %s: %w", ident, err)
	}
	sub, err := svc.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Fixed " + ident, IdempotencyKey: "submit-" + ident, Actor: ops})
	if err != nil {
		return "", "", fmt.Errorf("submit %s: %w", ident, err)
	}
	sha := *sub.HeadSHA
	if _, _, err := svc.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: sha,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}, Actor: ops}); err != nil {
		return "", "", fmt.Errorf("report checks of %s: %w", ident, err)
	}
	if _, _, err := svc.PostReview(ctx, task.ID, lifecycle.PostReviewParams{Outcome: lifecycle.ReviewApproved, Reviewer: reviewer}); err != nil {
		return "", "", fmt.Errorf("review %s: %w", ident, err)
	}
	op, err := svc.Ship(ctx, task.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
		ExpectedHeadSHA: sha, IdempotencyKey: "ship-" + ident, Actor: ops})
	if err != nil {
		return "", "", fmt.Errorf("ship %s: %w", ident, err)
	}
	return task.ID, op.OperationID, nil
}

// openStream opens the event stream of svc and sends the ID of each event
// it receives, with the time it came, until ctx ends.
func openStream(t testing.TB, ctx context.Context, svc *lifecycle.Service) <-chan streamed {
	t.Helper()
	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "stream", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead}, Actor: ops})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/task-events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	out := make(chan streamed, 100000)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				out <- streamed{id: id, at: time.Now()}
			}
		}
	}()
	return out
}

type streamed struct {
	id string
	at time.Time
}

// TestReplicas runs a mixed workload on three Services sharing one
// database: tasks are created, submitted, reviewed and shipped on B and C
// (and A), and a webhook subscription created on B delivers every event.
// A stream on A sees every event committed anywhere, in sequence order,
// with no gap and no duplicate; each ship merges once at the host; each
// event is delivered once.
func TestReplicas(t *testing.T) {
	needServer(t)
	t.Parallel()
	rec := &receiver{events: make(map[string]int)}
	hook := httptest.NewTLSServer(rec)
	t.Cleanup(hook.Close)
	r := newReplicas(t, 3, hook, nil)
	ctx := t.Context()
	bounds, err := r.stores[0].EventBounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := bounds.Last
	stream := openStream(t, ctx, r.svcs[0])
	if _, err := r.svcs[1].CreateSubscription(ctx, lifecycle.CreateSubscriptionParams{URL: hook.URL + "/hook",
		EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated, lifecycle.EventTaskReviewed, lifecycle.EventTaskShipped},
		Secret:     "0123456789abcdef0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}

	const tasks, workers = 30, 6
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		opsOf = make(map[string]string) // ship operation -> task
	)
	next := make(chan int)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				svc := r.svcs[1+w%2] // B and C do most of the work
				if i%5 == 0 {
					svc = r.svcs[0]
				}
				taskID, opID, err := shipTask(ctx, svc, fmt.Sprintf("REP-%d", i))
				if err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				opsOf[opID] = taskID
				mu.Unlock()
			}
		}()
	}
	for i := range tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		return
	}

	// Every operation succeeds, merged once at the host.
	waitUntil(t, 30*time.Second, "every ship operation succeeded", func() bool {
		for opID := range opsOf {
			op, err := r.stores[2].ShipOperation(ctx, opID)
			if err != nil || op.Status != lifecycle.ShipSucceeded {
				return false
			}
		}
		return true
	})
	runners := make(map[string]int)
	for opID := range opsOf {
		op, _ := r.stores[0].ShipOperation(ctx, opID)
		runners[op.LeaseOwner]++
	}
	t.Logf("ship operations run by %v", runners)
	if merges := r.host.Calls(memory.OpMerge); merges != tasks {
		t.Errorf("%d merges at the host for %d ships, want one each", merges, tasks)
	}

	// The stream on A has every event committed, in sequence order.
	all, err := r.stores[0].Events(ctx, lifecycle.EventFilter{After: start, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range all {
		want = append(want, e.ID)
	}
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case e, ok := <-stream:
			if !ok {
				t.Fatalf("the stream ended after %d of %d events", len(got), len(want))
			}
			got = append(got, e.id)
		case <-timeout:
			t.Fatalf("the stream on A had %d of %d events after 30s", len(got), len(want))
		}
	}
	if !slices.Equal(want, got) {
		t.Errorf("the stream on A differs from the events committed, in sequence order:\nwant %v\n got %v", want, got)
	}

	t.Logf("the stream on A saw the %d events committed on A, B and C in order", len(got))

	// Every event was delivered once.
	waitUntil(t, 30*time.Second, "every event delivered", func() bool { return len(rec.count()) >= len(want) })
	counts := rec.count()
	for _, id := range want {
		if counts[id] != 1 {
			t.Errorf("event %s delivered %d times, want once", id, counts[id])
		}
	}
	if len(counts) != len(want) {
		t.Errorf("%d events delivered, want %d", len(counts), len(want))
	}
}

// waitUntil polls cond until it holds, failing t after timeout.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}
