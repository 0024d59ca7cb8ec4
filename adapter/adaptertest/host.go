package adaptertest

import (
	"errors"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// Tests of what people do at the host, and of the host's failures.

var hostTests = []test{
	{name: "PushMovesHead", skip: needs("Push"), fn: testPushMovesHead},
	{name: "MergeByHand", skip: needs("MergeByHand"), fn: testMergeByHand},
	{name: "CloseAndReopen", skip: needs("Close"), fn: testCloseAndReopen},
}

var errorTests = []test{
	{name: "TemporaryMergeFailure", skip: needs("FailNextMerge"), fn: testTemporaryMergeFailure},
	{name: "RefusedMerge", skip: needs("RefuseNextMerge"), fn: testRefusedMerge},
}

// push pushes a commit to pr with the harness and checks the new head.
func push(t *testing.T, h Harness, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
	t.Helper()
	head := h.Push(t, a, pr)
	if !shaRE.MatchString(head) || head == pr.HeadSHA {
		t.Fatalf("Harness.Push returned %q; want the new head's full SHA, other than %s", head, pr.HeadSHA)
	}
	return head
}

// mergeOnce merges pr at head and checks the merge is a new one.
func mergeOnce(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, head string) {
	t.Helper()
	res, err := mergeAt(t, a, pr, head)
	if err != nil {
		t.Fatalf("Merge at the head %s: %v", head, err)
	}
	if !shaRE.MatchString(res.MergeCommitSHA) || res.AlreadyMerged {
		t.Errorf("Merge = %+v, want a new merge commit", res)
	}
	if got := read(t, a, pr); got.State != lifecycle.PullRequestMerged || got.HeadSHA != head {
		t.Errorf("after Merge: State %q at head %s; want merged at %s", got.State, got.HeadSHA, head)
	}
}

func testPushMovesHead(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	head := push(t, h, a, pr)
	got := read(t, a, pr)
	if got.HeadSHA != head || got.State != lifecycle.PullRequestOpen {
		t.Fatalf("after a push PullRequest = head %s %s; want head %s (pushed) open", got.HeadSHA, got.State, head)
	}
	_, err := mergeAt(t, a, pr, pr.HeadSHA)
	if !errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Errorf("Merge at the head before the push: error = %v, want ErrHeadMismatch", err)
	}
	if got := read(t, a, pr); got.State != lifecycle.PullRequestOpen || got.HeadSHA != head {
		t.Fatalf("after a merge at the old head: State %q head %s; want open at %s", got.State, got.HeadSHA, head)
	}
	mergeOnce(t, a, pr, head)
}

func testMergeByHand(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	sha := h.MergeByHand(t, a, pr)
	if !shaRE.MatchString(sha) {
		t.Fatalf("Harness.MergeByHand returned %q, not a merge commit SHA", sha)
	}
	got := read(t, a, pr)
	if got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != sha || got.HeadSHA != pr.HeadSHA {
		t.Errorf("after a merge by hand PullRequest = %s as %q at head %s; want merged as %s at %s", got.State, got.MergeCommitSHA, got.HeadSHA, sha, pr.HeadSHA)
	}
	res, err := mergeAt(t, a, pr, pr.HeadSHA)
	if err != nil {
		t.Fatalf("Merge after a merge by hand: %v", err)
	}
	if !res.AlreadyMerged || res.MergeCommitSHA != sha {
		t.Errorf("Merge after a merge by hand = %+v; want AlreadyMerged as %s", res, sha)
	}
	other := "0000000000000000000000000000000000000001"
	if _, err := mergeAt(t, a, pr, other); !errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Errorf("Merge at another head after a merge by hand: error = %v, want ErrHeadMismatch", err)
	}
	if got := read(t, a, pr); got.MergeCommitSHA != sha {
		t.Errorf("merge commit became %s, want %s still", got.MergeCommitSHA, sha)
	}
}

func testCloseAndReopen(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	h.Close(t, a, pr)
	if got := read(t, a, pr); got.State != lifecycle.PullRequestClosed || got.MergeCommitSHA != "" {
		t.Fatalf("after Close PullRequest = %s, merge commit %q; want closed, none", got.State, got.MergeCommitSHA)
	}
	if res, err := mergeAt(t, a, pr, pr.HeadSHA); err == nil {
		t.Errorf("Merge of a closed pull request = %+v, want an error", res)
	}
	if got := read(t, a, pr); got.State != lifecycle.PullRequestClosed {
		t.Fatalf("after a merge of a closed pull request State = %q, want closed", got.State)
	}
	if h.Reopen == nil {
		t.Log("Harness.Reopen is nil; set it to test reopening")
		return
	}
	h.Reopen(t, a, pr)
	if got := read(t, a, pr); got.State != lifecycle.PullRequestOpen || got.HeadSHA != pr.HeadSHA {
		t.Fatalf("after Reopen PullRequest = %s at %s, want open at %s", got.State, got.HeadSHA, pr.HeadSHA)
	}
	mergeOnce(t, a, pr, pr.HeadSHA)
}

func testTemporaryMergeFailure(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	h.FailNextMerge(t, a)
	_, err := mergeAt(t, a, pr, pr.HeadSHA)
	if !errors.Is(err, lifecycle.ErrTemporary) {
		t.Fatalf("Merge while the host fails temporarily: error = %v, want one matching ErrTemporary", err)
	}
	if got := read(t, a, pr); got.State != lifecycle.PullRequestOpen {
		t.Fatalf("after a failed merge State = %q, want open", got.State)
	}
	mergeOnce(t, a, pr, pr.HeadSHA) // the retry
}

func testRefusedMerge(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	msg := h.RefuseNextMerge(t, a)
	_, err := mergeAt(t, a, pr, pr.HeadSHA)
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Merge refused by the host: error = %v, want a *lifecycle.RefusedError", err)
	}
	if !strings.Contains(refused.Message, msg) || refused.Message == "" {
		t.Errorf("RefusedError.Message = %q, want the host's message %q", refused.Message, msg)
	}
	if errors.Is(err, lifecycle.ErrTemporary) || errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Errorf("a refusal matches ErrTemporary or ErrHeadMismatch: %v", err)
	}
	if got := read(t, a, pr); got.State != lifecycle.PullRequestOpen {
		t.Errorf("after a refused merge State = %q, want open", got.State)
	}
}
