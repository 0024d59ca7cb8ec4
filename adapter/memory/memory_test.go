package memory_test

import (
	"errors"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("KeepsApprovals", func(t *testing.T) {
		t.Parallel()
		adaptertest.Run(t, harness(memory.Config{}))
	})
	t.Run("DismissesStaleReviews", func(t *testing.T) {
		t.Parallel()
		adaptertest.Run(t, harness(memory.Config{DismissStaleReviews: true}))
	})
	t.Run("Batch", func(t *testing.T) {
		t.Parallel()
		h := harness(memory.Config{})
		h.New = func(t *testing.T) lifecycle.ProviderAdapter { return memory.New(memory.Config{}).Batch() }
		adaptertest.Run(t, h)
	})
}

// harness runs every hook the in-memory host supports.
func harness(cfg memory.Config) adaptertest.Harness {
	host := func(a lifecycle.ProviderAdapter) *memory.Adapter {
		if b, ok := a.(*memory.Batching); ok {
			return b.Adapter
		}
		return a.(*memory.Adapter)
	}
	return adaptertest.Harness{
		New: func(t *testing.T) lifecycle.ProviderAdapter { return memory.New(cfg) },
		Push: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return host(a).Push(pr.Number)
		},
		MergeByHand: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return host(a).MergeByHand(pr.Number)
		},
		Close: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			host(a).SetState(pr.Number, lifecycle.PullRequestClosed)
		},
		Reopen: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			host(a).SetState(pr.Number, lifecycle.PullRequestOpen)
		},
		SetCheck: func(t *testing.T, a lifecycle.ProviderAdapter, sha string, c lifecycle.CICheck) {
			host(a).SetCheck(sha, c)
		},
		Review: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, r lifecycle.HostReview) {
			// The memory host decides as it is told; this is the rule the
			// suite asks for.
			host(a).AddReview(pr.Number, lifecycle.HostReview{Reviewer: r.Reviewer, Outcome: r.Outcome, Body: r.Body})
			switch r.Outcome {
			case lifecycle.ReviewApproved:
				host(a).SetReviewDecision(pr.Number, lifecycle.DecisionApproved)
			case lifecycle.ReviewChangesRequested:
				host(a).SetReviewDecision(pr.Number, lifecycle.DecisionChangesRequested)
			}
		},
		FailNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) {
			host(a).FailNext(memory.OpMerge, &lifecycle.TemporaryError{Err: errors.New("502 Bad Gateway")})
		},
		RefuseNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) string {
			const msg = "Pull Request is not mergeable"
			host(a).FailNext(memory.OpMerge, &lifecycle.RefusedError{Message: msg})
			return msg
		},
	}
}
