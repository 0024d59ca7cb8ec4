package queuerun

import (
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
)

func TestCandidateKinds(t *testing.T) {
	t.Parallel()
	d := &Doc{Engine: mergequeue.New("base")}
	for _, tc := range []struct {
		c    mergequeue.Candidate
		want string
	}{
		{mergequeue.Candidate{ID: 1}, "chain"},
		{mergequeue.Candidate{ID: 2, Leaf: true}, "leaf"},
		{mergequeue.Candidate{ID: 3, Alt: 1}, "alternative"},
		{mergequeue.Candidate{ID: 4, Probe: 7}, "probe"},
	} {
		if got := d.candidateView(tc.c, "main", &Runner{}).Kind; got != tc.want {
			t.Errorf("kind of %+v = %q, want %q", tc.c, got, tc.want)
		}
	}
}
