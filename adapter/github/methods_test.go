package github

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// mergeIt merges pr at its head and fails the test on an error.
func mergeIt(t *testing.T, a *Adapter, pr lifecycle.PullRequest) lifecycle.MergeResult {
	t.Helper()
	res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatalf("Merge(#%d): %v", pr.Number, err)
	}
	return res
}

// TestMergeMethodAsAllowed: the merge method is the one preferred when
// GitHub allows it, else the first of merge, squash and rebase that the
// repository's settings and the base's rules allow; each case merges at
// the first request.
func TestMergeMethodAsAllowed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                  string
		preferred             string
		merge, squash, rebase bool
		rules                 []string // rules of main, as GitHub's JSON
		protection            *gh.Protection
		want                  string
	}{
		{name: "the repository decides", merge: true, squash: true, rebase: true, want: "merge"},
		{name: "squash only", squash: true, want: "squash"},
		{name: "rebase only", rebase: true, want: "rebase"},
		{name: "preferred and allowed", preferred: "rebase", merge: true, squash: true, rebase: true, want: "rebase"},
		{name: "preferred but not allowed", preferred: "merge", squash: true, rebase: true, want: "squash"},
		{name: "a ruleset allows squash only", merge: true, squash: true, rebase: true,
			rules: []string{`{"type":"pull_request","parameters":{"required_approving_review_count":0,"dismiss_stale_reviews_on_push":false,"require_code_owner_review":false,"require_last_push_approval":false,"required_review_thread_resolution":false,"allowed_merge_methods":["squash"]},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`},
			want:  "squash"},
		{name: "rulesets narrow each other", preferred: "merge", merge: true, squash: true, rebase: true,
			rules: []string{
				`{"type":"pull_request","parameters":{"required_approving_review_count":0,"allowed_merge_methods":["merge","rebase"]},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`,
				`{"type":"pull_request","parameters":{"required_approving_review_count":0,"allowed_merge_methods":["squash","rebase"]},"ruleset_source_type":"Organization","ruleset_source":"acme","ruleset_id":7}`,
			},
			want: "rebase"},
		{name: "a ruleset requires a linear history", merge: true, squash: true, rebase: true,
			rules: []string{`{"type":"required_linear_history","ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`},
			want:  "squash"},
		{name: "the protection requires a linear history", merge: true, squash: true, rebase: true,
			protection: &gh.Protection{RequireLinearHistory: &gh.RequireLinearHistory{Enabled: true}}, want: "squash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHub(t)
			f.SetMergeMethods(tc.merge, tc.squash, tc.rebase)
			if tc.rules != nil {
				f.SetRulesJSON("main", tc.rules...)
			}
			if tc.protection != nil {
				f.SetProtection("main", tc.protection)
			}
			a := f.adapter(t, Config{MergeMethod: tc.preferred})
			pr := open(t, f, a, 1)
			mergeIt(t, a, pr)
			if got := f.pull(t, pr.Number).MergeMethod; got != tc.want {
				t.Errorf("merged with %q, want %q", got, tc.want)
			}
			if n := f.Calls(githubtest.RouteMerge); n != 1 {
				t.Errorf("%d merge requests, want 1", n)
			}
		})
	}
}

// TestMergeSettingsUnreadable: GitHub answers the repository without its
// merge settings to credentials that may not push; GraphQL says them.
func TestMergeSettingsUnreadable(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetMergeMethods(false, false, true)
	f.HideMergeSettings(true)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	before := f.Usage().GraphQL
	mergeIt(t, a, pr)
	if got := f.pull(t, pr.Number).MergeMethod; got != "rebase" {
		t.Errorf("merged with %q, want rebase, the only method allowed", got)
	}
	if n := f.Usage().GraphQL - before; n != 1 {
		t.Errorf("%d GraphQL queries, want 1 for the settings REST left out", n)
	}
	if n := f.Calls(githubtest.RouteMerge); n != 1 {
		t.Errorf("%d merge requests, want 1", n)
	}
}

// TestMergeMethodRefusedAfterASettingsChange: the settings change after
// the adapter read them; GitHub's 405 naming the method has them read
// again, and the merge goes through with a method allowed now, at the
// second request. The settings read are kept for Config.ProtectionTTL.
func TestMergeMethodRefusedAfterASettingsChange(t *testing.T) {
	t.Parallel()
	f := newFakeGitHubWith(t, githubtest.Options{MergeabilityAtOnce: true})
	clock := fakeclock.New(time.Now())
	a := f.adapter(t, Config{Clock: clock})
	first, second := open(t, f, a, 1), open(t, f, a, 2)
	mergeIt(t, a, first)
	if got := f.pull(t, first.Number).MergeMethod; got != "merge" {
		t.Fatalf("first merged with %q, want merge", got)
	}
	f.SetMergeMethods(false, true, false) // squash only from now on
	repoReads := f.Calls(githubtest.RouteRepo)
	mergeIt(t, a, second)
	if got := f.pull(t, second.Number).MergeMethod; got != "squash" {
		t.Errorf("second merged with %q, want squash", got)
	}
	if n := f.Calls(githubtest.RouteMerge); n != 3 {
		t.Errorf("%d merge requests in all, want 3: one, then one refused and its retry", n)
	}
	if n := f.Calls(githubtest.RouteRepo) - repoReads; n != 1 {
		t.Errorf("the repository read %d times after the refusal, want once", n)
	}
	// Known now: the next merge asks for squash at once, without reading
	// the settings again.
	third := open(t, f, a, 3)
	repoReads = f.Calls(githubtest.RouteRepo)
	mergeIt(t, a, third)
	if got := f.pull(t, third.Number).MergeMethod; got != "squash" || f.Calls(githubtest.RouteMerge) != 4 {
		t.Errorf("third merged with %q after %d merge requests in all; want squash at the first", got, f.Calls(githubtest.RouteMerge))
	}
	if n := f.Calls(githubtest.RouteRepo) - repoReads; n > 1 { // EnsurePullRequest may read it for the default branch
		t.Errorf("the repository read %d times for the third merge", n)
	}
}

// TestNoMergeMethodAllowed: a repository allowing squash only under a
// ruleset allowing merge commits only cannot merge at all: a final
// refusal saying so, without a merge request.
func TestNoMergeMethodAllowed(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetMergeMethods(false, true, false)
	f.SetRulesJSON("main", `{"type":"pull_request","parameters":{"required_approving_review_count":0,"allowed_merge_methods":["merge"]},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) || errors.Is(err, lifecycle.ErrTemporary) || !strings.Contains(refused.Message, "no merge method") {
		t.Fatalf("Merge = %v, want a final refusal saying no method is allowed", err)
	}
	if n := f.Calls(githubtest.RouteMerge); n != 0 {
		t.Errorf("%d merge requests, want none", n)
	}
}

// TestShipSquashOnlyRepository: a task ships into a repository that
// allows squash merges only, as GitHub would refuse a merge commit.
func TestShipSquashOnlyRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	e.f.SetMergeMethods(false, true, false)
	task, sub := e.submitted(t)
	e.shippable(t, task, sub)
	op := e.ship(t, task, sub, lifecycle.ShipMergeOnly, nil)
	if op.Status != lifecycle.ShipSucceeded {
		t.Fatalf("ship: %s %+v, want succeeded", op.Status, op.Error)
	}
	if got := e.f.pull(t, sub.PRNumber).MergeMethod; got != "squash" {
		t.Errorf("merged with %q, want squash", got)
	}
	if n := e.f.Calls(githubtest.RouteMerge); n != 1 {
		t.Errorf("%d merge requests, want 1", n)
	}
}

// TestMergeWhileMergeabilityIsComputed: right after a merge into the
// base, GitHub refuses the next merge into it with 405 "Pull Request is
// not mergeable" while it works mergeability out, and has finished by the
// time the pull request is read again, which reads clean: a temporary
// failure with Reason mergeability_unknown, and the retry merges. A pull
// request read again with a reason of its own is a final refusal naming
// it.
func TestMergeWhileMergeabilityIsComputed(t *testing.T) {
	t.Parallel()
	f := newFakeGitHubWith(t, githubtest.Options{MergesRefusedWhileComputing: 1})
	a := f.adapter(t, Config{})
	first, second := open(t, f, a, 1), open(t, f, a, 2)
	readAll(t, a, lifecycle.ReadNow, []lifecycle.PullRequest{first, second}, nil)
	mergeIt(t, a, first)
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: second.PullRequestRef, ExpectedHeadSHA: second.HeadSHA})
	var temp *lifecycle.TemporaryError
	var refused *lifecycle.RefusedError
	if !errors.As(err, &temp) || temp.Reason != lifecycle.WaitMergeabilityUnknown || !errors.As(err, &refused) || refused.Message != "Pull Request is not mergeable" {
		t.Fatalf("merge right after another into the same base: %v, want temporary, Reason mergeability_unknown, with GitHub's message", err)
	}
	if rest, err := a.PullRequest(t.Context(), second.PullRequestRef); err != nil || rest.Mergeable != lifecycle.MergeabilityMergeable {
		t.Fatalf("read again: %q, %v; want mergeable (the case a re-read alone took for final)", rest.Mergeable, err)
	}
	mergeIt(t, a, second)

	for _, tc := range []struct {
		name string
		set  func(n int)
		want string
	}{
		{"conflicting", func(n int) { f.SetConflicting(n, true) }, "conflicts with its base"},
		{"a draft", func(n int) { f.SetDraft(n, true) }, "draft"},
		{"closed", func(n int) { f.ClosePullRequest(n) }, "closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := open(t, f, a, 10+len(tc.name))
			readOne(t, a, lifecycle.ReadNow, pr)
			tc.set(pr.Number)
			f.Inject(githubtest.RouteMerge, githubtest.Error(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
			_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
			if !errors.As(err, &refused) || errors.Is(err, lifecycle.ErrTemporary) || !strings.Contains(refused.Message, tc.want) {
				t.Errorf("merge refused as not mergeable, read again %s: %v; want a final refusal naming it", tc.name, err)
			}
		})
	}
}

// TestShipThroughMergeabilityComputation: two tasks shipped one after
// the other into the same base; GitHub refuses the second's first merge
// while it works its mergeability out, and the ship runner merges it at
// its next try.
func TestShipThroughMergeabilityComputation(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	e := newEnvWith(t, githubtest.Options{MergesRefusedWhileComputing: 1}, clock, func(c *lifecycle.Config) { c.ShipLease = time.Hour })
	firstTask, firstSub := e.submitted(t)
	e.shippable(t, firstTask, firstSub)
	secondTask, secondSub := e.submitted(t)
	e.shippable(t, secondTask, secondSub)
	if op := e.ship(t, firstTask, firstSub, lifecycle.ShipMergeOnly, nil); op.Status != lifecycle.ShipSucceeded {
		t.Fatalf("first ship: %s %+v", op.Status, op.Error)
	}
	op := e.ship(t, secondTask, secondSub, lifecycle.ShipMergeOnly, nil)
	if op.Status != lifecycle.ShipSucceeded {
		t.Fatalf("second ship: %s %+v, want succeeded after GitHub worked mergeability out", op.Status, op.Error)
	}
	if n, m := e.f.Calls(githubtest.RouteMerge), e.f.Merges(); n != 3 || m != 2 {
		t.Errorf("%d merge requests, %d merges; want 3 (one refused while computing) and 2", n, m)
	}
}
