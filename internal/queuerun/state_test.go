package queuerun

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// A failed probe's run outlives its candidate while a group of suspects
// keeps its commit: the entry convicted by it later is sent back with
// its checks' links.
func TestPruneKeepsRunOfSuspects(t *testing.T) {
	t.Parallel()
	failed := []lifecycletype.CICheck{{Name: "unit", Status: lifecycletype.CheckFailed, URL: "https://ci.example/unit/1"}}
	d := &Doc{
		Engine: &mergequeue.State{
			Entries:    []mergequeue.Entry{{ID: "a", Group: 9}},
			Candidates: []mergequeue.Candidate{{ID: 3, Entries: []string{"b"}, State: mergequeue.Testing}},
			Groups:     []mergequeue.Group{{ID: 9, Depth: 2, SHA: "probe-sha", Failed: []string{"unit"}}},
		},
		Runs: map[int]Run{
			3: {SHA: "under-test"},
			5: {SHA: "probe-sha", Checks: failed},
			6: {SHA: "gone"},
		},
	}
	d.prune(time.Now())
	ids := make([]int, 0, len(d.Runs))
	for id := range d.Runs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]int{3, 5}, ids); diff != "" {
		t.Fatalf("runs kept (-want +got):\n%s", diff)
	}
	got := failedChecks(d, mergequeue.Rework{Entry: "a", Reason: mergequeue.ReworkChecksFailed, Jobs: []string{"unit"}, SHA: "probe-sha"})
	if diff := cmp.Diff(failed, got); diff != "" {
		t.Errorf("checks of the rework (-want +got):\n%s", diff)
	}
}
