package lifecycle

import (
	"testing"
)

func TestOverallOf(t *testing.T) {
	t.Parallel()
	c := func(statuses ...CheckStatus) []Check {
		out := make([]Check, len(statuses))
		for i, s := range statuses {
			out[i] = Check{Name: string(s), Status: s}
		}
		return out
	}
	tests := []struct {
		name    string
		checks  []Check
		pending bool
		want    CIOverall
	}{
		{"no checks", nil, false, CINone},
		{"provider awaits CI", nil, true, CIPending},
		{"one passed", c(CheckPassed), false, CIPassed},
		{"passed and skipped", c(CheckPassed, CheckSkipped), false, CIPassed},
		{"only skipped", c(CheckSkipped, CheckSkipped), false, CINone},
		{"a failure wins", c(CheckPassed, CheckRunning, CheckFailed), false, CIFailed},
		{"running before passed", c(CheckPassed, CheckRunning), false, CIRunning},
		{"failure while pending", c(CheckFailed), true, CIFailed},
		{"passed while pending", c(CheckPassed), true, CIPending},
	}
	for _, tt := range tests {
		if got := overallOf(tt.checks, tt.pending); got != tt.want {
			t.Errorf("%s: overallOf = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	r := func(reviewer string, o ReviewOutcome) Review {
		return Review{Reviewer: Actor{ID: reviewer}, Outcome: o}
	}
	route := []Participant{{ID: "alice", Role: "reviewer"}, {ID: "bob", Role: "reviewer"}}
	tests := []struct {
		name         string
		policy       CodeReviewPolicy
		participants []Participant
		reviews      []Review
		want         ReviewDecision
		rework       bool
	}{
		{"never_require, nothing", PolicyNeverRequire, nil, nil, DecisionNotRequired, false},
		{"never_require, changes requested", PolicyNeverRequire, nil, []Review{r("x", ReviewChangesRequested)}, DecisionNotRequired, true},
		{"always_require, nothing", PolicyAlwaysRequire, route, nil, DecisionPending, false},
		{"always_require, participant approves", PolicyAlwaysRequire, route, []Review{r("alice", ReviewApproved)}, DecisionApproved, false},
		{"always_require, outsider approves", PolicyAlwaysRequire, route, []Review{r("mallory", ReviewApproved)}, DecisionPending, false},
		{"always_require, empty route, anyone approves", PolicyAlwaysRequire, nil, []Review{r("mallory", ReviewApproved)}, DecisionApproved, false},
		{"always_require, one approves one requests", PolicyAlwaysRequire, route, []Review{r("alice", ReviewApproved), r("bob", ReviewChangesRequested)}, DecisionChangesRequested, true},
		{"always_require, request then approve", PolicyAlwaysRequire, route, []Review{r("alice", ReviewChangesRequested), r("alice", ReviewApproved)}, DecisionApproved, false},
		{"comments change nothing", PolicyAlwaysRequire, route, []Review{r("alice", ReviewChangesRequested), r("alice", ReviewCommented)}, DecisionChangesRequested, true},
		{"outsider requests changes: no rework, decision kept", PolicyAlwaysRequire, route, []Review{r("alice", ReviewApproved), r("mallory", ReviewChangesRequested)}, DecisionApproved, false},
		{"github_rules without a host decision", PolicyGitHubRules, nil, []Review{r("x", ReviewApproved)}, DecisionApproved, false},
		{"github_rules, only comments", PolicyGitHubRules, nil, []Review{r("x", ReviewCommented)}, DecisionPending, false},
	}
	for _, tt := range tests {
		got, rework := decide(tt.policy, tt.participants, tt.reviews, "", false)
		if got != tt.want || rework != tt.rework {
			t.Errorf("%s: decide = %s, rework %v; want %s, %v", tt.name, got, rework, tt.want, tt.rework)
		}
	}
}

func TestDecideStaleApprovals(t *testing.T) {
	t.Parallel()
	old, cur := "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	at := func(who string, o ReviewOutcome, head string) Review {
		return Review{Reviewer: Actor{ID: who, Role: RoleReviewer}, Outcome: o, HeadSHA: head}
	}
	tests := []struct {
		name    string
		dismiss bool
		reviews []Review
		want    ReviewDecision
		rework  bool
	}{
		{"approval of the old head kept", false, []Review{at("alice", ReviewApproved, old)}, DecisionApproved, false},
		{"approval of the old head dismissed", true, []Review{at("alice", ReviewApproved, old)}, DecisionPending, false},
		{"approval of the current head counts", true, []Review{at("alice", ReviewApproved, old), at("alice", ReviewApproved, cur)}, DecisionApproved, false},
		{"changes requested at the old head still count", true, []Review{at("alice", ReviewChangesRequested, old)}, DecisionChangesRequested, true},
	}
	for _, tt := range tests {
		got, rework := decide(PolicyAlwaysRequire, nil, tt.reviews, cur, tt.dismiss)
		if got != tt.want || rework != tt.rework {
			t.Errorf("%s: decide = %s, rework %v; want %s, %v", tt.name, got, rework, tt.want, tt.rework)
		}
	}
}

func TestValidBranch(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"main": true, "feature/x-1": true, "lifecycle/eng-1": true,
		"a..b": false, "-x": false, "x/": false, "/x": false, "a b": false, "a~1": false, "a^": false,
		"a:b": false, "a?": false, "a*": false, "a[": false, "a\\b": false, "x.lock": false, "a@{b": false, "a//b": false,
	} {
		if got := validBranch(s); got != want {
			t.Errorf("validBranch(%q) = %v, want %v", s, got, want)
		}
	}
}
