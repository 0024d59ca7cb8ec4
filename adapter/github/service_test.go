package github

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a Service whose project "github" runs on an Adapter on the fake,
// served with the webhook at /hooks/github (applied before the answer)
// and /hooks/github-queued (queued, as the demo mounts it) beside the API
// at /api/.
type env struct {
	f     *fakeGitHub
	a     *Adapter
	svc   *lifecycle.Service
	srv   *httptest.Server
	clock *fakeclock.Clock // nil on the system clock
	logs  *syncBuffer
	agent lifecycle.Actor
	n     int
}

func newEnv(t testing.TB, clock *fakeclock.Clock, edit func(*lifecycle.Config)) *env {
	t.Helper()
	return newEnvWith(t, githubtest.Options{}, clock, edit)
}

// newEnvWith is newEnv on a fake with opts.
func newEnvWith(t testing.TB, opts githubtest.Options, clock *fakeclock.Clock, edit func(*lifecycle.Config)) *env {
	t.Helper()
	e := &env{f: newFakeGitHubWith(t, opts), clock: clock, logs: new(syncBuffer), agent: lifecycle.Actor{ID: "agent-gh", Role: lifecycle.RoleAgent}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	acfg := Config{WebhookSecret: testSecret, Logger: log, DeployPollInterval: time.Hour}
	if clock != nil {
		acfg.Clock = clock
	}
	e.a = e.f.adapter(t, acfg)
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	mux := http.NewServeMux()
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	cfg := lifecycle.Config{
		Store:             store,
		BaseURL:           e.srv.URL + "/api",
		Adapters:          []lifecycle.AdapterBinding{{Project: "github", Adapter: e.a}},
		Deployer:          e.a,
		ReviewRouter:      lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyGitHubRules}},
		Logger:            log,
		ReconcileInterval: time.Hour,
		ShipRetryBackoff:  time.Second,
	}
	if clock != nil {
		cfg.Clock = clock
	}
	if edit != nil {
		edit(&cfg)
	}
	svc, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Close(ctx)
	})
	e.svc = svc
	mux.Handle("/api/", http.StripPrefix("/api", svc.Handler()))
	mux.Handle("POST /hooks/github", e.a.WebhookHandler(svc))
	// As the demo mounts it: answered after one Store write, the host
	// read by the reconciler in the background.
	mux.Handle("POST /hooks/github-queued", e.a.WebhookHandler(svc.QueuedEvents()))
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), githubtest.Token) {
			t.Error("the token appears in the logs")
		}
	})
	return e
}

// submitted creates, starts and submits a task, its branch pushed.
func (e *env) submitted(t testing.TB) (lifecycle.Task, lifecycle.Submission) {
	t.Helper()
	ctx := context.Background()
	e.n++
	project := "github"
	task, err := e.svc.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: fmt.Sprintf("GH-%d", e.n), Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/GH-%d", e.n)}, Context: lifecycle.TaskContext{Project: &project},
		Actor: lifecycle.Actor{ID: "user", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.StartTask(ctx, task.ID, lifecycle.StartTaskParams{Actor: e.agent}); err != nil {
		t.Fatal(err)
	}
	e.f.Push(fmt.Sprintf("lifecycle/gh-%d", e.n)) // the agent pushes its work
	sub, err := e.svc.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Redirect keeps the query string", Actor: e.agent})
	if err != nil {
		t.Fatal(err)
	}
	return task, sub
}

// deliver posts a webhook delivery of kind on pull request n, as GitHub
// does, and returns the answer's status.
func (e *env) deliver(t testing.TB, n int, kind lifecycle.ProviderEventKind, id string) int {
	t.Helper()
	pr := lifecycle.PullRequest{PullRequestRef: e.a.ref(n), Head: e.f.pull(t, n).Head}
	event, payload := e.f.webhookPayload(pr, kind)
	req := signedDelivery(t, event, id, payload)
	req.RequestURI = ""
	req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(e.srv.URL, "http://")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// shippable makes CI pass and a reviewer approve, told by webhooks.
func (e *env) shippable(t testing.TB, task lifecycle.Task, sub lifecycle.Submission) {
	t.Helper()
	e.f.CheckRun(*sub.HeadSHA, "build", "success")
	if code := e.deliver(t, sub.PRNumber, lifecycle.ProviderChecksChanged, "d-ci-"+task.ID); code != http.StatusOK {
		t.Fatalf("check_run delivery answered %d", code)
	}
	e.f.Review(sub.PRNumber, "octocat", "APPROVED", *sub.HeadSHA)
	if code := e.deliver(t, sub.PRNumber, lifecycle.ProviderReviewSubmitted, "d-rv-"+task.ID); code != http.StatusOK {
		t.Fatalf("review delivery answered %d", code)
	}
	got, err := e.svc.Task(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(got.AvailableActions, lifecycle.ActionShip) {
		t.Fatalf("after CI and approval: actions %v, want ship", got.AvailableActions)
	}
}

func contains(acts []lifecycle.Action, a lifecycle.Action) bool {
	for _, x := range acts {
		if x == a {
			return true
		}
	}
	return false
}

// ship ships the task and returns its operation once finished; with a
// fake clock, it moves the clock a second every few milliseconds.
func (e *env) ship(t testing.TB, task lifecycle.Task, sub lifecycle.Submission, mode lifecycle.ShipMode, during func(op lifecycle.ShipOperation)) lifecycle.ShipOperation {
	t.Helper()
	ctx := context.Background()
	op, err := e.svc.Ship(ctx, task.ID, lifecycle.ShipParams{Mode: mode, TargetEnvironment: lifecycle.EnvironmentStaging, ExpectedHeadSHA: *sub.HeadSHA,
		Actor: lifecycle.Actor{ID: "user", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the ship operation to finish", func() bool {
		if op.Status != lifecycle.ShipQueued && op.Status != lifecycle.ShipRunning {
			return true
		}
		if during != nil {
			during(op)
		}
		if e.clock != nil {
			e.clock.Advance(time.Second)
		}
		op, _ = e.svc.ShipOperation(ctx, op.OperationID)
		return false
	})
	return op
}

// TestLifecycle runs a task through the whole lifecycle against the fake:
// create, start, submit, CI and approval learned by webhook, ship
// merge_and_deploy, the deploy system's deployment status, done.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	before := e.f.Calls("")
	task, sub := e.submitted(t)
	submitCalls := e.f.Calls("") - before
	if sub.Action != lifecycle.SubmissionCreated || sub.PRNumber != 1 {
		t.Fatalf("submission %+v", sub)
	}
	got, _ := e.svc.Task(context.Background(), task.ID)
	if got.Status != lifecycle.StatusInReview || contains(got.AvailableActions, lifecycle.ActionShip) {
		t.Fatalf("after submit: %s %v", got.Status, got.AvailableActions)
	}
	e.shippable(t, task, sub)

	before = e.f.Calls("")
	deployed := false
	op := e.ship(t, task, sub, lifecycle.ShipMergeAndDeploy, func(lifecycle.ShipOperation) {
		if d := e.f.LastDeployment(); d != nil && !deployed {
			deployed = true
			e.f.DeploymentStatus(d.GetID(), "in_progress", "")
			e.f.DeploymentStatus(d.GetID(), "success", "https://staging.example.com")
			// The deploy system's status reaches the Service by webhook.
			event, payload := "deployment_status", []byte(fmt.Sprintf(`{"deployment_status":{"state":"success","environment_url":"https://staging.example.com"},"deployment":{"id":%d,"sha":%q,"environment":"staging"},"repository":{"name":"widgets","owner":{"login":"acme"}}}`, d.GetID(), d.GetSHA()))
			req := signedDelivery(t, event, "d-dep", payload)
			req.RequestURI, req.URL.Scheme, req.URL.Host = "", "http", strings.TrimPrefix(e.srv.URL, "http://")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	shipCalls := e.f.Calls("") - before
	if op.Status != lifecycle.ShipSucceeded || op.Deployment == nil || op.Deployment.URL != "https://staging.example.com" {
		t.Fatalf("ship operation %+v (error %+v)", op, op.Error)
	}
	done, _ := e.svc.Task(context.Background(), task.ID)
	if done.Status != lifecycle.StatusDone || len(done.AvailableActions) != 0 {
		t.Errorf("after ship: %s %v, want done", done.Status, done.AvailableActions)
	}
	if e.f.Merges() != 1 || e.f.Calls("POST /deployments") != 1 {
		t.Errorf("%d merges, %d deployments; want one each", e.f.Merges(), e.f.Calls("POST /deployments"))
	}
	t.Logf("API calls: submit %d, ship (merge and deploy) %d", submitCalls, shipCalls)
}

func TestShipHeadMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	task, sub := e.submitted(t)
	e.shippable(t, task, sub)
	e.f.Inject("PUT /pulls/{number}/merge", githubtest.Error(http.StatusConflict, "Head branch was modified. Review and try the merge again."))
	op := e.ship(t, task, sub, lifecycle.ShipMergeOnly, nil)
	if op.Status != lifecycle.ShipFailed || op.Error == nil || op.Error.Code != "head_sha_mismatch" {
		t.Fatalf("ship after a 409: %s %+v, want failed with head_sha_mismatch", op.Status, op.Error)
	}
	if e.f.Merges() != 0 {
		t.Error("merged")
	}
}

// TestShipThroughMergeQueue: six tasks ship into a base whose rulesets
// require GitHub's merge queue: each is offered ship, enqueued by its
// merge, followed while CI runs on its merge group, and lands; the ship
// operation shows the wait meanwhile.
func TestShipThroughMergeQueue(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	// Each Merge follows its entry for two seconds of real time at most:
	// the merge groups' CI is held back until a ship operation shows its
	// wait in the queue.
	e := newEnvWith(t, githubtest.Options{EnforceBranchProtection: true}, clock, func(c *lifecycle.Config) {
		c.ShipLease, c.ProviderTimeout = time.Hour, 2*time.Second
	})
	e.f.SetRulesJSON("main", mergeQueueRule, requireBuild)
	ctx := context.Background()
	var ops []lifecycle.ShipOperation
	var nums []int
	for range 6 {
		task, sub := e.submitted(t)
		e.shippable(t, task, sub)
		op, err := e.svc.Ship(ctx, task.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging, ExpectedHeadSHA: *sub.HeadSHA,
			Actor: lifecycle.Actor{ID: "user", Role: lifecycle.RoleUser}})
		if err != nil {
			t.Fatal(err)
		}
		ops, nums = append(ops, op), append(nums, sub.PRNumber)
	}
	sawWait := false
	reported := map[string]bool{}
	waitUntil(t, 60*time.Second, "the ship operations to finish", func() bool {
		finished := 0
		for i := range ops {
			op, err := e.svc.ShipOperation(ctx, ops[i].OperationID)
			if err != nil {
				t.Fatal(err)
			}
			ops[i] = op
			if op.Status != lifecycle.ShipQueued && op.Status != lifecycle.ShipRunning {
				finished++
			}
			if op.Wait != nil && op.Wait.Reason == lifecycle.WaitMergeQueue {
				sawWait = true
			}
		}
		for _, n := range nums {
			// CI runs on each merge group (the merge_group event).
			if _, sha, ok := e.f.MergeGroup(n); ok && sawWait && !reported[sha] {
				reported[sha] = true
				e.f.CheckRun(sha, "build", "success")
			}
		}
		if finished == len(ops) {
			return true
		}
		clock.Advance(time.Second)
		return false
	})
	for i, op := range ops {
		if op.Status != lifecycle.ShipSucceeded {
			t.Errorf("ship %d: %s %+v, want succeeded", i, op.Status, op.Error)
		}
	}
	for _, n := range nums {
		if p := e.f.pull(t, n); !p.Merged || e.f.Enqueues(n) != 1 {
			t.Errorf("#%d: merged %v, %d enqueues; want merged through one entry", n, p.Merged, e.f.Enqueues(n))
		}
	}
	if e.f.Merges() != 6 || e.f.Calls(githubtest.RouteMerge) != 0 {
		t.Errorf("%d merges, %d REST merges; want 6 through the queue, none past it", e.f.Merges(), e.f.Calls(githubtest.RouteMerge))
	}
	if !sawWait {
		t.Error("no ship operation showed its wait in the merge queue")
	}
}

func TestShipBaseModifiedRetried(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	e := newEnv(t, clock, func(c *lifecycle.Config) { c.ShipLease = time.Hour })
	task, sub := e.submitted(t)
	e.shippable(t, task, sub)
	base := githubtest.Error(http.StatusMethodNotAllowed, "Base branch was modified. Review and try the merge again.")
	e.f.Inject("PUT /pulls/{number}/merge", base, base)
	start := clock.Now()
	var thirdAt time.Time
	op := e.ship(t, task, sub, lifecycle.ShipMergeOnly, func(lifecycle.ShipOperation) {
		if thirdAt.IsZero() && e.f.Calls(githubtest.RouteMerge) == 3 {
			thirdAt = clock.Now()
		}
	})
	if thirdAt.IsZero() {
		thirdAt = clock.Now()
	}
	if op.Status != lifecycle.ShipSucceeded {
		t.Fatalf("ship: %s %+v, want succeeded after two 405s", op.Status, op.Error)
	}
	if n := e.f.Calls("PUT /pulls/{number}/merge"); n != 3 || e.f.Merges() != 1 {
		t.Errorf("%d merge requests, %d merges; want 3 and 1", n, e.f.Merges())
	}
	// With backoff: the tries are ShipRetryBackoff (1 s) and then 2 s
	// apart on the Service's clock.
	if waited := thirdAt.Sub(start); waited < 3*time.Second {
		t.Errorf("third try after %s of the clock, want the 1 s and 2 s backoffs before it", waited)
	}
	for _, want := range []string{"attempt=1 wait=1s", "attempt=2 wait=2s"} {
		if !strings.Contains(e.logs.String(), want) {
			t.Errorf("no retry logged with %q", want)
		}
	}
}

func TestShipLostMergeAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	task, sub := e.submitted(t)
	e.shippable(t, task, sub)
	e.f.Inject("PUT /pulls/{number}/merge", githubtest.Fault{Drop: true})
	op := e.ship(t, task, sub, lifecycle.ShipMergeOnly, nil)
	if op.Status != lifecycle.ShipSucceeded || op.MergeCommitSHA == nil || *op.MergeCommitSHA != e.f.pull(t, sub.PRNumber).MergeCommitSHA {
		t.Fatalf("ship with the merge's answer lost: %+v", op)
	}
	if n := e.f.Merges(); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
}

// TestShipHonoursRetryAfter: a secondary rate limit asks for 120 seconds;
// the runner merges again no sooner, on the Service's clock.
func TestShipHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	e := newEnv(t, clock, func(c *lifecycle.Config) { c.ShipLease = time.Hour })
	task, sub := e.submitted(t)
	e.shippable(t, task, sub)
	limited := githubtest.Error(http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
	limited.Header = http.Header{"Retry-After": {"120"}}
	e.f.Inject("PUT /pulls/{number}/merge", limited)
	start := clock.Now()
	var retriedAt time.Time
	op := e.ship(t, task, sub, lifecycle.ShipMergeOnly, func(lifecycle.ShipOperation) {
		if retriedAt.IsZero() && e.f.Calls("PUT /pulls/{number}/merge") == 2 {
			retriedAt = clock.Now()
		}
	})
	if op.Status != lifecycle.ShipSucceeded {
		t.Fatalf("ship: %s %+v", op.Status, op.Error)
	}
	if retriedAt.IsZero() {
		retriedAt = clock.Now()
	}
	if waited := retriedAt.Sub(start); waited < 120*time.Second {
		t.Errorf("merged again after %s of the clock, want at least the 120 s GitHub asked for", waited)
	}
}

// TestDuplicateDeliveryAppliedOnce: GitHub's redelivery of a delivery is
// not applied again.
func TestDuplicateDeliveryAppliedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	_, sub := e.submitted(t)
	e.f.Push(fmt.Sprintf("lifecycle/gh-%d", e.n))
	for range 2 {
		if code := e.deliver(t, sub.PRNumber, lifecycle.ProviderHeadChanged, "same-delivery"); code != http.StatusOK {
			t.Fatalf("delivery answered %d", code)
		}
	}
	reads := e.f.Calls("GET /pulls/{number}")
	if code := e.deliver(t, sub.PRNumber, lifecycle.ProviderHeadChanged, "same-delivery"); code != http.StatusOK {
		t.Fatalf("delivery answered %d", code)
	}
	if n := e.f.Calls("GET /pulls/{number}"); n != reads {
		t.Errorf("a delivery applied before read the pull request again (%d reads, then %d)", reads, n)
	}
}

// TestSynchronizeWebhookOnStream: a push to the pull request's branch,
// told by a pull_request synchronize webhook, is a task.updated event with
// the new headSha on the event stream.
func TestSynchronizeWebhookOnStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	task, sub := e.submitted(t)
	_, key, err := e.svc.CreateAPIKey(context.Background(), lifecycle.CreateAPIKeyParams{Name: "stream", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead},
		Actor: lifecycle.Actor{ID: "watcher", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/task-events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	head := e.f.Push(fmt.Sprintf("lifecycle/gh-%d", e.n))
	if code := e.deliver(t, sub.PRNumber, lifecycle.ProviderHeadChanged, "d-sync"); code != http.StatusOK {
		t.Fatalf("synchronize delivery answered %d", code)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var typ string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && typ == "task.updated":
			data := strings.TrimPrefix(line, "data: ")
			// task.updated names the changed field; its summary and the
			// task read again carry the new head.
			if strings.Contains(data, task.ID) && strings.Contains(data, `"changedFields":["headSha"]`) && strings.Contains(data, head) {
				got, err := e.svc.Task(context.Background(), task.ID)
				if err != nil || got.HeadSHA == nil || *got.HeadSHA != head {
					t.Errorf("task after the event: headSha %v, %v; want %s", got.HeadSHA, err, head)
				}
				return
			}
		}
	}
	t.Fatalf("no task.updated with headSha %s on the stream (%v)", head, sc.Err())
}

// TestShipBaseModifiedGivesUp: a base branch that keeps changing is tried
// a few times within ShipRetryBudget (here 10 s: at most at 0, 1, 3 and 7
// s of the clock, as the backoff doubles; the next wait of 8 s would pass
// it), then the operation fails with GitHub's message.
func TestShipBaseModifiedGivesUp(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	e := newEnv(t, clock, func(c *lifecycle.Config) { c.ShipLease = time.Hour; c.ShipRetryBudget = 10 * time.Second })
	task, sub := e.submitted(t)
	e.shippable(t, task, sub)
	base := githubtest.Error(http.StatusMethodNotAllowed, "Base branch was modified. Review and try the merge again.")
	e.f.Inject(githubtest.RouteMerge, base, base, base, base, base, base)
	op := e.ship(t, task, sub, lifecycle.ShipMergeOnly, nil)
	if op.Status != lifecycle.ShipFailed || op.Error == nil || !strings.Contains(op.Error.Message, "Base branch was modified") {
		t.Fatalf("ship: %s %+v, want failed with GitHub's message", op.Status, op.Error)
	}
	if n := e.f.Calls(githubtest.RouteMerge); n < 2 || n > 4 || e.f.Merges() != 0 {
		t.Errorf("%d merge requests, %d merges; want 2 to 4 tries and no merge", n, e.f.Merges())
	}
}

// TestQueuedWebhookWithinASecond: a check run and a commit status posted
// at GitHub, each told by its webhook to the queued handler (answered
// after one Store write, as the demo mounts it), are on the task within a
// second: the reconciler, woken, reads the pull request in full at once,
// without waiting for the next sweep (a minute away).
func TestQueuedWebhookWithinASecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, func(c *lifecycle.Config) { c.ReconcileInterval = time.Minute })
	task, sub := e.submitted(t)
	post := func(event, id string, payload []byte) {
		t.Helper()
		req := signedDelivery(t, event, id, payload)
		req.RequestURI = ""
		req.URL.Scheme, req.URL.Host, req.URL.Path = "http", strings.TrimPrefix(e.srv.URL, "http://"), "/hooks/github-queued"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s delivery answered %d", event, resp.StatusCode)
		}
	}
	shows := func(name string, status lifecycle.CheckStatus) func() bool {
		return func() bool {
			ci, _, err := e.svc.CIStatus(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range ci.Checks {
				if c.Name == name && c.Status == status {
					return true
				}
			}
			return false
		}
	}
	start := time.Now()
	e.f.CheckRun(*sub.HeadSHA, "build", "success")
	post("check_run", "d-run", e.f.CheckRunPayload(*sub.HeadSHA, "build", "success"))
	waitUntil(t, time.Second, "the check run on the task", shows("build", lifecycle.CheckPassed))
	run := time.Since(start)
	start = time.Now()
	e.f.Status(*sub.HeadSHA, "ci/jenkins", "failure")
	post("status", "d-status", e.f.StatusPayload(*sub.HeadSHA, "ci/jenkins", "failure"))
	waitUntil(t, time.Second, "the status on the task", shows("ci/jenkins", lifecycle.CheckFailed))
	t.Logf("webhook to fact: check run %v, status %v", run, time.Since(start))
}
