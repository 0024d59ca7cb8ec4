// Package adaptertest is the conformance suite of [lifecycle.ProviderAdapter].
// Every adapter runs it from its own tests, pointed at a real or faked
// host:
//
//	func TestConformance(t *testing.T) {
//		adaptertest.Run(t, adaptertest.Harness{New: ...})
//	}
package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// Harness tells the suite how to make adapters.
type Harness struct {
	// New returns an adapter on a fresh, empty repository.
	New func(t *testing.T) lifecycle.ProviderAdapter
}

// Run runs every conformance test, each on a fresh adapter.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, a lifecycle.ProviderAdapter)
	}{
		{"EnsureCreatesThenReuses", testEnsureCreatesThenReuses},
		{"TasksGetTheirOwnPullRequests", testTasksGetTheirOwnPullRequests},
		{"HeadAndBaseHints", testHeadAndBaseHints},
		{"PullRequestReadsCurrentHead", testPullRequestReadsCurrentHead},
		{"MergeRefusesAnotherHead", testMergeRefusesAnotherHead},
		{"MergeHappensOnce", testMergeHappensOnce},
		{"UnknownPullRequest", testUnknownPullRequest},
		{"ConcurrentEnsureOpensOne", testConcurrentEnsureOpensOne},
		{"CancelledContext", testCancelledContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, h.New(t))
		})
	}
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
	got, err := a.PullRequest(t.Context(), last.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	checkPR(t, got)
	if got.HeadSHA != last.HeadSHA || got.State != lifecycle.PullRequestOpen || got.Number != last.Number {
		t.Errorf("PullRequest = #%d head %s %s; want #%d head %s open", got.Number, got.HeadSHA, got.State, last.Number, last.HeadSHA)
	}
}

func testMergeRefusesAnotherHead(t *testing.T, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	wrong := "0000000000000000000000000000000000000001"
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: wrong})
	if !errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Fatalf("Merge at another head: error = %v, want ErrHeadMismatch", err)
	}
	got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.PullRequestOpen {
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
	got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != res.MergeCommitSHA {
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
