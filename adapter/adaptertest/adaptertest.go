// Package adaptertest is the conformance suite of [lifecycle.ProviderAdapter]
// and of the optional interfaces an adapter may implement besides it
// ([lifecycle.CIProvider], [lifecycle.ReviewDecider], [lifecycle.Deployer],
// [lifecycle.WebhookIntake], [lifecycle.BatchReader]). Every adapter runs it from its own tests,
// pointed at a real or faked host (an httptest.Server for GitHub and
// GitLab):
//
//	func TestConformance(t *testing.T) {
//		adaptertest.Run(t, adaptertest.Harness{New: ..., Push: ...})
//	}
//
// [RunQueueHost] is the suite of [lifecycle.QueueHost], with its own
// [QueueHostHarness].
//
// Only [Harness.New] is required. Every other member of [Harness] is a hook
// that lets the suite do at the host what people do there (push, merge by
// hand, review, report CI, deliver a webhook); a nil hook skips the tests
// that need it, saying which hook would run them. The tests of an optional
// interface run when the adapter implements it, and fail when a hook of
// that interface is set but the adapter does not implement it, so an
// adapter cannot lose an interface unnoticed.
package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// Harness tells the suite how to make adapters and how to change things at
// their host. Hooks get the adapter New returned for the test: a harness
// whose host lives apart from the adapter (an httptest.Server faking
// GitHub) keeps it reachable from there, say in a map keyed by the adapter
// that New fills. Tests run in parallel, each on its own adapter, so hooks
// must be safe to call for different adapters at once. Hooks fail the test
// (t.Fatal) when they cannot do their work.
type Harness struct {
	// New returns an adapter on a fresh, empty repository. Required.
	New func(t *testing.T) lifecycle.ProviderAdapter

	// Push pushes a new commit to the branch of pr, as a person does at
	// the host, and returns its full SHA, the pull request's new head.
	Push func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) (headSHA string)
	// MergeByHand merges pr at its head, as a person does with the host's
	// merge button, and returns the merge commit's SHA.
	MergeByHand func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) (mergeCommitSHA string)
	// Close closes pr without merging it, as a person does at the host.
	Close func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest)
	// Reopen reopens pr after Close.
	Reopen func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest)

	// SetCheck makes the host's CI report check c of commit sha (a head
	// the suite got from the adapter), replacing any check of that name:
	// the harness translates c.Status into the host's own word (GitHub's
	// "success", GitLab's "running"). Needs a lifecycle.CIProvider.
	SetCheck func(t *testing.T, a lifecycle.ProviderAdapter, sha string, c lifecycle.CICheck)
	// CIPendingWhenAbsent says that the host expects CI on every head (the
	// fake host requires checks), so that Checks of a head with no checks
	// yet must report Pending; otherwise it must not.
	CIPendingWhenAbsent bool

	// Review makes r.Reviewer review pr at its head with r.Outcome and
	// r.Body (the other members of r are ignored). The host's rule must
	// be: one approval approves the pull request, unless a reviewer's
	// latest review requests changes. Needs a lifecycle.ReviewDecider.
	Review func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, r lifecycle.HostReview)

	// NewDeployer returns the Deployer that deploys the merged commits of
	// a's repositories (a itself, if it is one).
	NewDeployer func(t *testing.T, a lifecycle.ProviderAdapter) lifecycle.Deployer
	// FinishDeployment, if set, is called while Deploy(req) runs, for a
	// Deployer that waits for the host to report its deployment done (a
	// GitHub deployment status set by the CD system): it waits for the
	// deployment of req to appear at the host and completes it
	// successfully, failing the test if none appears within seconds. It is
	// not called for a Deploy that must not deploy again. Nil means Deploy
	// finishes on its own.
	FinishDeployment func(t *testing.T, a lifecycle.ProviderAdapter, req lifecycle.DeployRequest)

	// Deliver returns a new delivery of the host's webhook, as the host
	// would POST it to the handler of a's lifecycle.WebhookIntake,
	// authenticated with the secret a was configured with, for an event
	// of kind on pr (for ProviderDeploymentStatus, any deployment; for
	// [IgnoredEvent], an event the adapter takes nothing from, such as
	// GitHub's ping). Each call is a new delivery, with its own delivery
	// ID. It returns nil for a kind the host cannot deliver, which skips
	// that kind. The suite mounts the handler at a path of its own. Needs
	// a lifecycle.WebhookIntake.
	Deliver func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) *http.Request
	// WebhookSignatureHeader names the header of a delivery that signs
	// its body (GitHub's "X-Hub-Signature-256"), and WebhookTokenHeader
	// the one that carries a secret token (GitLab's "X-Gitlab-Token").
	// One of them is required with Deliver: the suite removes or alters
	// it, or alters a signed body, and expects 401.
	WebhookSignatureHeader string
	WebhookTokenHeader     string

	// FailNextMerge makes the host fail the adapter's next merge in a way
	// that may pass (an HTTP 502, a rate limit, GitHub's "Base branch was
	// modified"), without merging.
	FailNextMerge func(t *testing.T, a lifecycle.ProviderAdapter)
	// RefuseNextMerge makes the host refuse the adapter's next merge for
	// good, without merging (GitHub's 405 "Pull Request is not
	// mergeable"), and returns the host's message, which the adapter's
	// *lifecycle.RefusedError must carry.
	RefuseNextMerge func(t *testing.T, a lifecycle.ProviderAdapter) (message string)
}

// IgnoredEvent is the kind [Harness.Deliver] is asked for when the suite
// wants a delivery the adapter ignores.
const IgnoredEvent lifecycle.ProviderEventKind = "adaptertest_ignored"

// test is one conformance test. skip says why the harness cannot run it,
// or "".
type test struct {
	name string
	skip func(h Harness) string
	fn   func(t *testing.T, h Harness, a lifecycle.ProviderAdapter)
}

// Run runs every conformance test, each on a fresh adapter.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("adaptertest: Harness.New is nil; set it to a function returning an adapter on a fresh repository")
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"", baseTests},
		{"HostChanges", hostTests},
		{"Errors", errorTests},
		{"CI", ciTests},
		{"Reviews", reviewTests},
		{"Deploy", deployTests},
		{"Webhook", webhookTests},
		{"Batch", batchTests},
	}
	for _, g := range groups {
		for _, tt := range g.tests {
			name := tt.name
			if g.name != "" {
				name = g.name + "/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if tt.skip != nil {
					if why := tt.skip(h); why != "" {
						t.Skip(why)
					}
				}
				tt.fn(t, h, h.New(t))
			})
		}
	}
}

// needs returns a skip function for tests that need the named hooks
// (fields of Harness).
func needs(hooks ...string) func(h Harness) string {
	return func(h Harness) string {
		for _, n := range hooks {
			f := reflect.ValueOf(h).FieldByName(n)
			if !f.IsValid() || f.Kind() != reflect.Func {
				panic("adaptertest: no hook Harness." + n)
			}
			if f.IsNil() {
				return fmt.Sprintf("Harness.%s is nil; set it to run this test", n)
			}
		}
		return ""
	}
}

// implements returns a as an I, the optional interface a test is about,
// or skips the test when a is not one. When hookSet says that the
// harness sets hook, a hook of I, it fails the test instead: the adapter
// lost an interface.
func implements[I any](t *testing.T, a lifecycle.ProviderAdapter, hook string, hookSet bool) I {
	t.Helper()
	i, ok := a.(I)
	switch {
	case ok:
	case hookSet:
		t.Fatalf("Harness.%s is set but %T is not a %s", hook, a, reflect.TypeFor[I]())
	default:
		t.Skipf("%T is not a %s", a, reflect.TypeFor[I]())
	}
	return i
}

var baseTests = []test{
	{name: "EnsureCreatesThenReuses", fn: base(testEnsureCreatesThenReuses)},
	{name: "TasksGetTheirOwnPullRequests", fn: base(testTasksGetTheirOwnPullRequests)},
	{name: "HeadAndBaseHints", fn: base(testHeadAndBaseHints)},
	{name: "PullRequestReadsCurrentHead", fn: base(testPullRequestReadsCurrentHead)},
	{name: "MergeRefusesAnotherHead", fn: base(testMergeRefusesAnotherHead)},
	{name: "MergeHappensOnce", fn: base(testMergeHappensOnce)},
	{name: "UnknownPullRequest", fn: base(testUnknownPullRequest)},
	{name: "ConcurrentEnsureOpensOne", fn: base(testConcurrentEnsureOpensOne)},
	{name: "CancelledContext", fn: base(testCancelledContext)},
}

// base adapts a test that needs no hook.
func base(fn func(t *testing.T, a lifecycle.ProviderAdapter)) func(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	return func(t *testing.T, _ Harness, a lifecycle.ProviderAdapter) { fn(t, a) }
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// task returns a task as the Service passes it to an adapter.
func task(n int) lifecycle.Task {
	project := "web"
	return lifecycle.Task{
		ID:         fmt.Sprintf("tsk_adaptertest%04d", n),
		Identifier: fmt.Sprintf("ENG-%d", n),
		Title:      "Fix the login redirect",
		Status:     lifecycle.StatusInProgress,
		Priority:   lifecycle.PriorityMedium,
		Links:      lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/ENG-%d", n)},
		Context:    lifecycle.TaskContext{Project: &project, Goal: "login works"},
	}
}

func request(n int, submission string) lifecycle.PullRequestRequest {
	return lifecycle.PullRequestRequest{
		Task:         task(n),
		SubmissionID: submission,
		Summary:      "Fixed the redirect and added a test.",
		Notes:        "The old code dropped the query string.",
		Checks:       []lifecycle.SubmittedCheck{{Name: "unit", Status: lifecycle.CheckPassed}},
	}
}

func ensure(t *testing.T, a lifecycle.ProviderAdapter, req lifecycle.PullRequestRequest) lifecycle.PullRequest {
	t.Helper()
	pr, err := a.EnsurePullRequest(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsurePullRequest(%s, %s): %v", req.Task.Identifier, req.SubmissionID, err)
	}
	return pr
}

// read returns the pull request as the adapter reads it now.
func read(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) lifecycle.PullRequest {
	t.Helper()
	got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
	if err != nil {
		t.Fatalf("PullRequest(%s): %v", pr.PullRequestRef, err)
	}
	return got
}

// mergeAt asks the adapter to merge pr at head.
func mergeAt(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, head string) (lifecycle.MergeResult, error) {
	t.Helper()
	return a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: head})
}

// checkPR checks the members every pull request must have.
func checkPR(t *testing.T, pr lifecycle.PullRequest) {
	t.Helper()
	if pr.Number < 1 || pr.URL == "" || pr.Head == "" || pr.Base == "" || pr.Repo == "" {
		t.Errorf("pull request %+v lacks a number, URL, head, base or repository", pr)
	}
	if !shaRE.MatchString(pr.HeadSHA) {
		t.Errorf("HeadSHA %q is not 40 lowercase hex digits", pr.HeadSHA)
	}
}

func testEnsureCreatesThenReuses(t *testing.T, a lifecycle.ProviderAdapter) {
	first := ensure(t, a, request(1, "sub_first"))
	checkPR(t, first)
	if !first.Created || first.State != lifecycle.PullRequestOpen {
		t.Errorf("first EnsurePullRequest: Created %v, State %q; want true, open", first.Created, first.State)
	}
	again := ensure(t, a, request(1, "sub_second"))
	checkPR(t, again)
	if again.Created {
		t.Error("second EnsurePullRequest for the same branch opened another pull request")
	}
	if again.Number != first.Number || again.URL != first.URL || again.Head != first.Head {
		t.Errorf("second EnsurePullRequest = #%d %s (%s), want #%d %s (%s)", again.Number, again.URL, again.Head, first.Number, first.URL, first.Head)
	}
}

func testTasksGetTheirOwnPullRequests(t *testing.T, a lifecycle.ProviderAdapter) {
	one := ensure(t, a, request(1, "sub_one"))
	two := ensure(t, a, request(2, "sub_two"))
	if one.Number == two.Number || one.Head == two.Head {
		t.Errorf("two tasks share pull request #%d or branch %q", one.Number, one.Head)
	}
}

func testHeadAndBaseHints(t *testing.T, a lifecycle.ProviderAdapter) {
	req := request(1, "sub_hint")
	req.Head = "agent/custom-branch"
	pr := ensure(t, a, req)
	if pr.Head != req.Head {
		t.Errorf("Head = %q, want the hint %q", pr.Head, req.Head)
	}
	again := ensure(t, a, request(1, "sub_default"))
	if again.Number == pr.Number {
		t.Error("a submission on the default branch reused the pull request of another branch")
	}
}

func testPullRequestReadsCurrentHead(t *testing.T, a lifecycle.ProviderAdapter) {
	ensure(t, a, request(1, "sub_a"))
	last := ensure(t, a, request(1, "sub_b"))
	got := read(t, a, last)
	checkPR(t, got)
	if got.HeadSHA != last.HeadSHA || got.State != lifecycle.PullRequestOpen || got.Number != last.Number {
		t.Errorf("PullRequest = #%d head %s %s; want #%d head %s open", got.Number, got.HeadSHA, got.State, last.Number, last.HeadSHA)
	}
	if got.DismissesStaleReviews != last.DismissesStaleReviews {
		t.Errorf("PullRequest says DismissesStaleReviews %v, EnsurePullRequest said %v", got.DismissesStaleReviews, last.DismissesStaleReviews)
	}
}

func testMergeRefusesAnotherHead(t *testing.T, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	wrong := "0000000000000000000000000000000000000001"
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: wrong})
	if !errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Fatalf("Merge at another head: error = %v, want ErrHeadMismatch", err)
	}
	if got := read(t, a, pr); got.State != lifecycle.PullRequestOpen {
		t.Errorf("after a refused merge State = %q, want open", got.State)
	}
}

func testMergeHappensOnce(t *testing.T, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if !shaRE.MatchString(res.MergeCommitSHA) || res.AlreadyMerged {
		t.Errorf("Merge = %+v, want a merge commit SHA and AlreadyMerged false", res)
	}
	if got := read(t, a, pr); got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != res.MergeCommitSHA {
		t.Errorf("after Merge: State %q, MergeCommitSHA %q; want merged, %q", got.State, got.MergeCommitSHA, res.MergeCommitSHA)
	}
	again, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatalf("second Merge: %v", err)
	}
	if !again.AlreadyMerged || again.MergeCommitSHA != res.MergeCommitSHA {
		t.Errorf("second Merge = %+v, want AlreadyMerged and the same commit %s", again, res.MergeCommitSHA)
	}
}

func testUnknownPullRequest(t *testing.T, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	ref := pr.PullRequestRef
	ref.Number += 1000
	if _, err := a.PullRequest(t.Context(), ref); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("PullRequest(unknown) error = %v, want ErrNotFound", err)
	}
	if _, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: ref, ExpectedHeadSHA: pr.HeadSHA}); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Merge(unknown) error = %v, want ErrNotFound", err)
	}
}

func testConcurrentEnsureOpensOne(t *testing.T, a lifecycle.ProviderAdapter) {
	const n = 10
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		numbers = map[int]int{}
		created int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, err := a.EnsurePullRequest(context.Background(), request(1, fmt.Sprintf("sub_c%d", i)))
			if err != nil {
				t.Errorf("EnsurePullRequest: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			numbers[pr.Number]++
			if pr.Created {
				created++
			}
		}()
	}
	wg.Wait()
	if len(numbers) != 1 || created != 1 {
		t.Errorf("%d concurrent EnsurePullRequest calls gave pull requests %v with %d created; want one, created once", n, numbers, created)
	}
}

func testCancelledContext(t *testing.T, a lifecycle.ProviderAdapter) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.EnsurePullRequest(ctx, request(1, "sub_a")); err == nil {
		t.Error("EnsurePullRequest with a cancelled context succeeded")
	}
}
