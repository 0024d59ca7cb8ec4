package adaptertest

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// Tests of lifecycle.CIProvider.

var ciTests = []test{
	{name: "NoChecksYet", fn: testNoChecksYet},
	{name: "ChecksOfTheHead", skip: needs("SetCheck"), fn: testChecksOfTheHead},
}

// checks returns the checks the provider reports of pr at head, by name,
// after checking each is valid and reported once.
func checks(t *testing.T, ci lifecycle.CIProvider, pr lifecycle.PullRequest, head string) (map[string]lifecycle.CheckStatus, lifecycle.CIReport) {
	t.Helper()
	rep, err := ci.Checks(t.Context(), lifecycle.CIQuery{Task: task(1), PullRequest: pr.PullRequestRef, HeadSHA: head})
	if err != nil {
		t.Fatalf("Checks(%s): %v", head, err)
	}
	byName := make(map[string]lifecycle.CheckStatus, len(rep.Checks))
	for _, c := range rep.Checks {
		if c.Name == "" || !c.Status.Valid() {
			t.Errorf("Checks(%s) reported check %q with status %q; want a name and a valid status", head, c.Name, c.Status)
		}
		if _, dup := byName[c.Name]; dup {
			t.Errorf("Checks(%s) reported check %q twice; want each check once, as it is now", head, c.Name)
		}
		byName[c.Name] = c.Status
	}
	return byName, rep
}

func testNoChecksYet(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	ci := implements[lifecycle.CIProvider](t, a, "SetCheck", h.SetCheck != nil)
	if ci.Name() == "" {
		t.Error("Name() is empty")
	}
	pr := ensure(t, a, request(1, "sub_a"))
	got, rep := checks(t, ci, pr, pr.HeadSHA)
	if len(got) != 0 {
		t.Errorf("Checks of a new head = %v, want none", got)
	}
	if rep.Pending != h.CIPendingWhenAbsent {
		t.Errorf("Checks of a head with no checks: Pending = %v, want %v (Harness.CIPendingWhenAbsent)", rep.Pending, h.CIPendingWhenAbsent)
	}
}

func testChecksOfTheHead(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	ci := implements[lifecycle.CIProvider](t, a, "SetCheck", h.SetCheck != nil)
	if ci.CountsSelfReported() {
		t.Error("CountsSelfReported() = true for a host with checks of its own; only a provider without checks may count the agent's")
	}
	pr := ensure(t, a, request(1, "sub_a"))
	other := ensure(t, a, request(2, "sub_b"))
	if other.HeadSHA == pr.HeadSHA {
		t.Fatalf("two pull requests share head %s; the suite needs two commits", pr.HeadSHA)
	}
	want := map[string]lifecycle.CheckStatus{
		"build": lifecycle.CheckPassed,
		"test":  lifecycle.CheckFailed,
		"lint":  lifecycle.CheckRunning,
		"docs":  lifecycle.CheckSkipped,
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		h.SetCheck(t, a, pr.HeadSHA, lifecycle.CICheck{Name: name, Status: want[name], URL: fmt.Sprintf("https://ci.example.com/%s", name)})
	}
	h.SetCheck(t, a, other.HeadSHA, lifecycle.CICheck{Name: "other", Status: lifecycle.CheckFailed})
	// A host may count a skipped check as passed (GitHub merges with it);
	// it must not make it fail or run.
	sameChecks := func(got, want map[string]lifecycle.CheckStatus) bool {
		if got["docs"] == lifecycle.CheckPassed {
			got = maps.Clone(got)
			got["docs"] = lifecycle.CheckSkipped
		}
		return maps.Equal(got, want)
	}
	if got, _ := checks(t, ci, pr, pr.HeadSHA); !sameChecks(got, want) {
		t.Errorf("Checks of the head = %v, want %v (only that commit's; docs may be passed)", got, want)
	}
	if got, _ := checks(t, ci, other, other.HeadSHA); !maps.Equal(got, map[string]lifecycle.CheckStatus{"other": lifecycle.CheckFailed}) {
		t.Errorf("Checks of another commit = %v, want only its check \"other\"", got)
	}

	// A check that finishes is reported as it is now, once.
	h.SetCheck(t, a, pr.HeadSHA, lifecycle.CICheck{Name: "lint", Status: lifecycle.CheckPassed})
	want["lint"] = lifecycle.CheckPassed
	if got, _ := checks(t, ci, pr, pr.HeadSHA); !sameChecks(got, want) {
		t.Errorf("Checks after lint finished = %v, want %v", got, want)
	}
}
