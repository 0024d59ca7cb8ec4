package gitlab_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// stack is a Service whose "gitlab" project lives on a fake GitLab.
type stack struct {
	f         *gitlabtest.Server
	a         *gitlab.Adapter
	d         *gitlab.Deployer
	svc       *lifecycle.Service
	clock     *fakeclock.Clock // nil: the system clock
	server    *httptest.Server // svc.Handler() at /, the hook at POST /hooks/gitlab
	key       string
	project   string
	approvals int64 // approvals each merge request needs
}

type stackOptions struct {
	fakeClock bool
	approvals int64
	// settled makes the fake work out mergeability at once.
	settled bool
	// reconcile is the Service's ReconcileInterval; 0 keeps its default.
	reconcile time.Duration
	// git runs the fake in git mode (gitlabtest's EnableGit), the
	// adapter with a mirror of its own.
	git bool
	// queue is the Service's merge queue configuration.
	queue lifecycle.MergeQueueConfig
}

func newStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	st := &stack{project: "gitlab", approvals: o.approvals}
	var clock lifecycle.Clock
	fo := gitlabtest.Options{ApprovalsRequired: o.approvals, MergeabilityAtOnce: o.settled}
	if o.fakeClock {
		st.clock = fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		clock, fo.Now = st.clock, st.clock.Now
	}
	st.f = gitlabtest.NewServer(t, fo)
	mirror := ""
	if o.git {
		st.f.EnableGit(t)
		mirror = t.TempDir()
	}
	st.a = newAdapter(t, st.f, func(c *gitlab.Config) { c.Clock = clock; c.WebhookToken = hookToken; c.MirrorDir = mirror })
	var err error
	// An hour between readings: only a Deployment Hook ends the wait.
	st.d, err = gitlab.NewDeployer(gitlab.DeployerConfig{Adapter: st.a, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	st.svc, err = lifecycle.New(lifecycle.Config{
		Store:             store,
		BaseURL:           "http://lifecycle.test",
		Adapters:          []lifecycle.AdapterBinding{{Project: st.project, Adapter: st.a}},
		Deployer:          st.d,
		Clock:             clock,
		ShipPollInterval:  20 * time.Millisecond,
		ReconcileInterval: o.reconcile,
		MergeQueue:        o.queue,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.svc.Close(t.Context()) })
	_, st.key, err = st.svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "test", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead, lifecycle.ScopeTasksRead},
		Actor: lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", st.svc.Handler())
	mux.Handle("POST /hooks/gitlab", st.a.WebhookHandler(st.svc))
	st.server = httptest.NewServer(mux)
	t.Cleanup(st.server.Close)
	return st
}

var agent = lifecycle.Actor{ID: "agent-1", Role: lifecycle.RoleAgent}

// started creates and starts a task of the GitLab project and pushes the
// agent's work to its branch, returning its ID.
func (st *stack) started(t testing.TB, ident string) string {
	t.Helper()
	st.f.Push("lifecycle/" + strings.ToLower(ident))
	tk, err := st.svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: ident, Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident}, Context: lifecycle.TaskContext{Project: &st.project}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.svc.StartTask(t.Context(), tk.ID, lifecycle.StartTaskParams{Actor: agent}); err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// submitted creates, starts and submits a task, returning it.
func (st *stack) submitted(t testing.TB, ident string) lifecycle.Task {
	t.Helper()
	id := st.started(t, ident)
	sub, err := st.svc.Submit(t.Context(), id, lifecycle.SubmitParams{Summary: "Fixed the redirect.", Actor: agent})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if sub.Action != "created" || sub.Owner == nil || *sub.Owner != "acme" || sub.PRNumber < 1 {
		t.Fatalf("submission = %+v, want a merge request opened in acme/web", sub)
	}
	return st.task(t, id)
}

func (st *stack) task(t testing.TB, id string) lifecycle.Task {
	t.Helper()
	tk, err := st.svc.Task(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// green runs a passing pipeline on the task's merge request and has the
// Service read the host again.
func (st *stack) green(t testing.TB, tk lifecycle.Task) lifecycle.Task {
	t.Helper()
	st.f.Pipeline(int64(*tk.PRNumber), "success", &gl.CommitStatus{Name: "build", Status: "success"}, &gl.CommitStatus{Name: "test", Status: "success"})
	for range st.approvals {
		st.f.Approve(int64(*tk.PRNumber), "alice")
	}
	if err := st.svc.Reconcile(t.Context(), tk.ID); err != nil {
		t.Fatal(err)
	}
	tk = st.task(t, tk.ID)
	if !slices.Contains(tk.AvailableActions, lifecycle.ActionShip) {
		t.Fatalf("after CI passed and approval: actions %v, want ship", tk.AvailableActions)
	}
	return tk
}

func (st *stack) ship(t testing.TB, tk lifecycle.Task, mode lifecycle.ShipMode, head string) lifecycle.ShipOperation {
	t.Helper()
	op, err := st.svc.Ship(t.Context(), tk.ID, lifecycle.ShipParams{Mode: mode, TargetEnvironment: lifecycle.EnvironmentStaging, ExpectedHeadSHA: head,
		Actor: lifecycle.Actor{ID: "lead", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatalf("Ship: %v", err)
	}
	return op
}

// finished waits (in real time) for a ship operation to end.
func (st *stack) finished(t testing.TB, id string) lifecycle.ShipOperation {
	t.Helper()
	var op lifecycle.ShipOperation
	waitUntil(t, 10*time.Second, "ship operation "+id+" to finish", func() bool {
		var err error
		if op, err = st.svc.ShipOperation(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return op.Status == lifecycle.ShipSucceeded || op.Status == lifecycle.ShipFailed
	})
	return op
}

// hook posts a webhook delivery to the stack's server.
func (st *stack) hook(t testing.TB, req *http.Request) int {
	t.Helper()
	body, _ := io.ReadAll(req.Body)
	out, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, st.server.URL+"/hooks/gitlab", strings.NewReader(string(body)))
	out.Header = req.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The whole lifecycle: submit opens a merge request, CI and an approval
// make it shippable, ship merges it at the head and deploys the merge
// commit to staging, finished by the deploy job and woken by GitLab's
// Deployment Hook.
func TestLifecycleThroughService(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{approvals: 1})
	tk := st.submitted(t, "GL-1")
	if tk.Status != lifecycle.StatusInReview || tk.Facts.CI != "" && tk.Facts.CI == lifecycle.CIPassed {
		t.Fatalf("after submit: %s CI %q", tk.Status, tk.Facts.CI)
	}
	tk = st.green(t, tk)
	op := st.ship(t, tk, lifecycle.ShipMergeAndDeploy, *tk.HeadSHA)

	// The deploy job finishes the deployment; GitLab's hook says so.
	var dep int64
	waitUntil(t, 10*time.Second, "a deployment of the merge commit recorded at GitLab", func() bool {
		dep = st.f.RunningDeployment("staging", st.f.MergeRequest(1).MergeCommitSHA)
		return dep != 0
	})
	st.f.SetDeployment(dep, "success")
	if code := st.hook(t, st.f.DeploymentHook(dep, "success", hookToken)); code != http.StatusOK {
		t.Fatalf("Deployment Hook answered %d", code)
	}

	done := st.finished(t, op.OperationID)
	mr := st.f.MergeRequest(1)
	if done.Status != lifecycle.ShipSucceeded || done.MergeCommitSHA == nil || *done.MergeCommitSHA != mr.MergeCommitSHA || done.Deployment == nil || done.Deployment.ID != strconv.FormatInt(dep, 10) {
		t.Fatalf("operation = %+v (error %+v); want succeeded, merged as %s, deployment %d", done, done.Error, mr.MergeCommitSHA, dep)
	}
	if mr.State != "merged" {
		t.Errorf("merge request is %s", mr.State)
	}
	if tk := st.task(t, tk.ID); tk.Status != lifecycle.StatusDone {
		t.Errorf("task is %s, want done", tk.Status)
	}
}

// A commit pushed after the ship was accepted, with no webhook: the
// runner's reading right before the merge sees it, fails the operation
// with head_moved, and nothing is merged.
func TestShipHeadMismatch(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{})
	tk := st.green(t, st.submitted(t, "GL-2"))
	st.f.Push(*tk.Branch)
	op := st.finished(t, st.ship(t, tk, lifecycle.ShipMergeOnly, *tk.HeadSHA).OperationID)
	if op.Status != lifecycle.ShipFailed || op.Error == nil || op.Error.Code != "head_moved" {
		t.Fatalf("operation = %+v, error %+v; want failed with head_moved", op, op.Error)
	}
	if st.f.MergeRequest(1).State != "opened" {
		t.Error("merged despite the new head")
	}
}

// GitLab merged but its answer was lost (a 502 from a proxy): the runner
// reads the merge request, finds it merged at the expected head, and
// does not merge again.
func TestLostMergeAnswerMergesOnce(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{})
	tk := st.green(t, st.submitted(t, "GL-3"))
	st.f.Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`, Apply: true})
	op := st.finished(t, st.ship(t, tk, lifecycle.ShipMergeOnly, *tk.HeadSHA).OperationID)
	if op.Status != lifecycle.ShipSucceeded || op.MergeCommitSHA == nil || *op.MergeCommitSHA != st.f.MergeRequest(1).MergeCommitSHA {
		t.Fatalf("operation = %+v, error %+v; want succeeded with the merge commit", op, op.Error)
	}
	if n := st.f.Calls(gitlabtest.RouteMerge); n != 1 {
		t.Errorf("merge was sent %d times, want once", n)
	}
}

// A 429 on merge with RateLimit-Reset 30 seconds ahead: the runner waits
// those 30 seconds on the Service's clock, not its own backoff, and then
// merges.
func TestRateLimitResetHonoured(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{fakeClock: true})
	tk := st.green(t, st.submitted(t, "GL-4"))
	reset := st.clock.Now().Add(30 * time.Second).Unix()
	st.f.Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Ratelimit-Reset": {strconv.FormatInt(reset, 10)}}, Body: `{"message":"Retry later"}`})
	op := st.ship(t, tk, lifecycle.ShipMergeOnly, *tk.HeadSHA)
	waitUntil(t, 10*time.Second, "the runner to try to merge", func() bool { return st.f.Calls(gitlabtest.RouteMerge) > 0 })
	// The runner waits on the clock until the reset; moved short of it,
	// the clock leaves that wait pending and the merge untried.
	resetAt := time.Unix(reset, 0)
	if !st.clock.WaitForWaiterAt(resetAt, 5*time.Second) {
		t.Fatal("the runner is not waiting until the rate limit's reset")
	}
	st.clock.Advance(29 * time.Second)
	if !st.clock.PendingAt(resetAt) {
		t.Fatal("the runner's wait for the reset ended before the reset")
	}
	if n := st.f.Calls(gitlabtest.RouteMerge); n != 1 {
		t.Fatalf("merge sent %d times before the rate limit's reset, want once", n)
	}
	waitUntil(t, 10*time.Second, "the operation to succeed after the reset", func() bool {
		st.clock.Advance(time.Second)
		got, err := st.svc.ShipOperation(t.Context(), op.OperationID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == lifecycle.ShipFailed {
			t.Fatalf("operation = %+v, error %+v; want succeeded after the reset", got, got.Error)
		}
		return got.Status == lifecycle.ShipSucceeded
	})
	if n := st.f.Calls(gitlabtest.RouteMerge); n != 2 {
		t.Errorf("merge sent %d times, want twice (the 429, then the merge)", n)
	}
}

// A Merge Request Hook for new commits makes the Service read the merge
// request again: task.updated with the new headSha reaches the event
// stream. A delivery with another token is refused.
func TestMergeRequestHookUpdatesTheStream(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{})
	tk := st.submitted(t, "GL-5")

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, st.server.URL+"/task-events/stream?eventTypes=task.updated", nil)
	req.Header.Set("Authorization", "Bearer "+st.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}

	head := st.f.Push(*tk.Branch)
	pr := lifecycle.PullRequest{PullRequestRef: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: *tk.PRNumber}}
	if code := st.hook(t, delivery(st.f, pr, lifecycle.ProviderHeadChanged, "not-the-token")); code != http.StatusUnauthorized {
		t.Errorf("a delivery with another token was answered %d, want 401", code)
	}
	if code := st.hook(t, delivery(st.f, pr, lifecycle.ProviderHeadChanged, hookToken)); code != http.StatusOK {
		t.Fatalf("Merge Request Hook answered %d", code)
	}

	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string                    `json:"type"`
			Data lifecycle.TaskUpdatedData `json:"data"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "task.updated" && ev.Data.TaskID == tk.ID && slices.Contains(ev.Data.ChangedFields, "headSha") {
			if !strings.Contains(ev.Data.Summary, head) {
				t.Errorf("task.updated summary %q does not name the new head %s", ev.Data.Summary, head)
			}
			if got := st.task(t, tk.ID); got.HeadSHA == nil || *got.HeadSHA != head {
				t.Errorf("task headSha = %v, want %s", got.HeadSHA, head)
			}
			return
		}
	}
	t.Fatalf("the stream ended without task.updated for the new head: %v", lines.Err())
}

// A reviewer's "Request changes" at GitLab: the task's host decision is
// changes_requested, the agent is offered the task again (rework), and
// it cannot be shipped.
func TestRequestedChangesOfferRework(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{approvals: 1})
	tk := st.green(t, st.submitted(t, "GL-6"))
	st.f.SetReviewerState(int64(*tk.PRNumber), "bob", "requested_changes")
	if err := st.svc.Reconcile(t.Context(), tk.ID); err != nil {
		t.Fatal(err)
	}
	tk = st.task(t, tk.ID)
	if tk.Facts.HostDecision != lifecycle.DecisionChangesRequested || !slices.Contains(tk.AvailableActions, lifecycle.ActionStart) || slices.Contains(tk.AvailableActions, lifecycle.ActionShip) {
		t.Errorf("after bob requested changes: host decision %q, actions %v; want changes_requested, start (rework) and no ship", tk.Facts.HostDecision, tk.AvailableActions)
	}
}

// GitLab will not merge while blocking discussions are unresolved, a
// requirement the lifecycle does not model: the reading before the merge
// says the merge request is blocked, and the ship operation fails, its
// message naming GitLab's reason, and nothing is merged.
func TestShipRefusalNamesBlockingDiscussions(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{})
	tk := st.green(t, st.submitted(t, "GL-7"))
	st.f.SetDetailedMergeStatus(int64(*tk.PRNumber), "discussions_not_resolved")
	op := st.finished(t, st.ship(t, tk, lifecycle.ShipMergeOnly, *tk.HeadSHA).OperationID)
	if op.Status != lifecycle.ShipFailed || op.Error == nil || !strings.Contains(op.Error.Message, "all threads must be resolved") {
		t.Fatalf("operation = %+v, error %+v; want failed, in GitLab's words, naming the unresolved blocking discussions", op, op.Error)
	}
	if st.f.MergeRequest(int64(*tk.PRNumber)).State != "opened" {
		t.Error("merged despite the refusal")
	}
}

// A Merge Request Hook applied by the Service while GitLab rate-limits the
// adapter: the Service cannot read the merge request, marks the task to
// be read again and fails the event; the delivery was taken, and is
// answered 202, not an error that GitLab would count toward disabling the
// hook (it delivers nothing again). Once GitLab's wait has passed, the
// reconciler learns the new head.
func TestHookWhileGitLabIsRateLimited(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{fakeClock: true})
	tk := st.submitted(t, "GL-8")
	head := st.f.Push(*tk.Branch)
	pr := lifecycle.PullRequest{PullRequestRef: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: *tk.PRNumber}}
	limited := gitlabtest.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"30"}}, Body: `{"message":"Retry later"}`}
	// The merge request and its CI, read beside it, are answered 429,
	// unless the first 429 came back before the second was sent: the
	// adapter then sent nothing more until GitLab's wait has passed.
	st.f.Inject(gitlabtest.RouteGetMR, limited)
	st.f.Inject(gitlabtest.RouteGetMR, limited)
	if code := st.hook(t, delivery(st.f, pr, lifecycle.ProviderHeadChanged, hookToken)); code != http.StatusAccepted {
		t.Fatalf("Merge Request Hook while rate limited answered %d, want 202", code)
	}
	st.f.DropFaults(gitlabtest.RouteGetMR)
	st.clock.Advance(30 * time.Second)
	if err := st.svc.Reconcile(t.Context(), tk.ID); err != nil {
		t.Fatal(err)
	}
	if got := st.task(t, tk.ID); got.HeadSHA == nil || *got.HeadSHA != head {
		t.Errorf("after the reconciler: headSha %v, want %s", got.HeadSHA, head)
	}
}
