package gitlab

import (
	"fmt"
	"strings"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// A wait reads the train page after page until its car is found, at most
// trainPages of them: a car past them is said to be beyond the cars read,
// of the train's count (GitLab's X-Total).
func TestTrainWaitReadsBoundedPages(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{MergeTrains: true})
	a, err := New(Config{BaseURL: f.URL, Token: "glpat-test-token", Project: gitlabtest.ProjectPath})
	if err != nil {
		t.Fatal(err)
	}
	a.trainPage, a.trainPages = 1, 2
	var iids []int64
	for i := range 3 {
		iid := f.OpenForkMergeRequest(99, fmt.Sprintf("car-%d", i), "main", "a car")
		f.Pipeline(iid, "success")
		iids = append(iids, iid)
	}
	f.SettleMergeability()
	s, err := a.project(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, iid := range iids {
		if _, _, err := a.client.MergeTrains.AddMergeRequestToMergeTrain(s.id, iid, &gl.AddMergeRequestToMergeTrainOptions{}, gl.WithContext(t.Context())); err != nil {
			t.Fatalf("add !%d to the train: %v", iid, err)
		}
	}
	for _, tc := range []struct {
		iid   int64
		where string
		pages int
	}{
		{iids[0], "car 1 of 3", 1},
		{iids[1], "car 2 of 3", 2},
		{iids[2], "beyond car 2 of 3", 2},
	} {
		car, err := a.trainCar(t.Context(), s, tc.iid)
		if err != nil || car == nil {
			t.Fatalf("the car of !%d: %v, %v", tc.iid, car, err)
		}
		before := f.Calls(gitlabtest.RouteListTrain)
		want := fmt.Sprintf("gitlab: merge request !%d is %s on the merge train into main, fresh, its pipeline %d running", tc.iid, tc.where, car.Pipeline.ID)
		if got := a.trainWait(t.Context(), s, tc.iid, car); !strings.HasPrefix(got, want) {
			t.Errorf("the wait of !%d:\n got %s\nwant %s...", tc.iid, got, want)
		}
		if n := f.Calls(gitlabtest.RouteListTrain) - before; n != tc.pages {
			t.Errorf("the wait of !%d read %d pages, want %d", tc.iid, n, tc.pages)
		}
	}
}
