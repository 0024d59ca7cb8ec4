package gitlab_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// trainProject is a project with merge trains, on a fake clock, and a
// merge request whose pipeline passed, ready to merge.
type trainProject struct {
	f     *gitlabtest.Server
	a     *gitlab.Adapter
	clock *fakeclock.Clock
	pr    lifecycle.PullRequest
	iid   int64
}

const trainPoll = 10 * time.Second

func newTrainProject(t *testing.T) *trainProject {
	t.Helper()
	tp := &trainProject{clock: fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	tp.f = gitlabtest.NewServer(t, gitlabtest.Options{MergeTrains: true, Now: tp.clock.Now})
	tp.a = newAdapter(t, tp.f, func(c *gitlab.Config) { c.Clock = tp.clock; c.MergeTrainPollInterval = trainPoll })
	tp.f.Push("lifecycle/eng-1")
	tp.pr = ensure(t, tp.a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	tp.iid = int64(tp.pr.Number)
	tp.f.Pipeline(tp.iid, "success")
	tp.f.SettleMergeability()
	return tp
}

// merge starts a merge at the head and returns a channel of its outcome.
func (tp *trainProject) merge(ctx context.Context, head string) <-chan mergeOutcome {
	out := make(chan mergeOutcome, 1)
	go func() {
		res, err := tp.a.Merge(ctx, lifecycle.MergeRequest{Ref: tp.pr.PullRequestRef, ExpectedHeadSHA: head})
		out <- mergeOutcome{res, err}
	}()
	return out
}

type mergeOutcome struct {
	res lifecycle.MergeResult
	err error
}

// parked waits until the merge waits for its next look at its car.
func (tp *trainProject) parked(t *testing.T) {
	t.Helper()
	if !tp.clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the merge does not wait for its car")
	}
}

// On a project with merge trains, a merge adds the merge request to its
// train at the expected head, never merging it past the train, follows
// its car while the train's pipeline runs, and returns the merge commit
// once GitLab merged it.
func TestMergeThroughTheMergeTrain(t *testing.T) {
	t.Parallel()
	tp := newTrainProject(t)
	out := tp.merge(t.Context(), tp.pr.HeadSHA)
	tp.parked(t)
	if st, _, ok := tp.f.TrainCar(tp.iid); !ok || st != "fresh" {
		t.Fatalf("the car: %q, %v; want fresh, on the train", st, ok)
	}
	tp.clock.Advance(trainPoll) // the car still rides
	tp.parked(t)
	merge := tp.f.FinishTrain(tp.iid, "success")
	tp.clock.Advance(trainPoll)
	o := testenv.Receive(t, 5*time.Second, out, "the end of the merge")
	if o.err != nil || o.res.MergeCommitSHA != merge || o.res.AlreadyMerged {
		t.Fatalf("Merge = %+v, %v; want merged as %s by this call", o.res, o.err, merge)
	}
	calls := tp.f.AllCalls()
	if calls[gitlabtest.RouteMerge] != 0 || calls[gitlabtest.RouteAddTrainCar] != 1 || calls[gitlabtest.RouteGetTrainCar] != 3 || calls[gitlabtest.RouteListTrain] != 0 {
		t.Errorf("calls %v: want no merge past the train, one car added, read three times, the train never listed (no wait said)", calls)
	}
}

// A merge that outlasts its context is temporary, with the reason
// merge_train (the ship runner shows it and tries again), and the next
// merge follows the same car, adding nothing.
func TestMergeTrainOutlastingTheContext(t *testing.T) {
	t.Parallel()
	tp := newTrainProject(t)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	o := testenv.Receive(t, 5*time.Second, tp.merge(ctx, tp.pr.HeadSHA), "the end of the merge")
	var te *lifecycle.TemporaryError
	if !errors.As(o.err, &te) || te.Reason != gitlab.ReasonMergeTrain || te.RetryAfter != trainPoll {
		t.Fatalf("a merge past its context: %v; want a TemporaryError, merge_train, retry after %s", o.err, trainPoll)
	}
	out := tp.merge(t.Context(), tp.pr.HeadSHA)
	tp.parked(t)
	merge := tp.f.FinishTrain(tp.iid, "success")
	tp.clock.Advance(trainPoll)
	if o := testenv.Receive(t, 5*time.Second, out, "the end of the merge"); o.err != nil || o.res.MergeCommitSHA != merge {
		t.Fatalf("the next merge: %+v, %v; want merged as %s", o.res, o.err, merge)
	}
	if n := tp.f.Calls(gitlabtest.RouteAddTrainCar); n != 1 {
		t.Errorf("the car was added %d times, want once", n)
	}
	// Once merged, a merge finds it merged before it was called.
	if res, err := tp.a.Merge(t.Context(), lifecycle.MergeRequest{Ref: tp.pr.PullRequestRef, ExpectedHeadSHA: tp.pr.HeadSHA}); err != nil || !res.AlreadyMerged || res.MergeCommitSHA != merge {
		t.Errorf("a merge of the merged one: %+v, %v; want already merged as %s", res, err, merge)
	}
}

// GitLab drops a merge request from its train: the merge is refused in
// GitLab's words, from its system note (the train's pipeline failed, a
// person removed it), or its head moved (the source branch was updated).
func TestMergeTrainRemovals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		drop     func(tp *trainProject)
		refused  string
		mismatch bool
	}{
		{"the train's pipeline failed", func(tp *trainProject) { tp.f.FinishTrain(tp.iid, "failed") },
			"GitLab removed merge request !1 from the merge train into main: pipeline did not succeed", false},
		{"removed by a person", func(tp *trainProject) { tp.f.DropFromTrain(tp.iid, "") },
			"GitLab removed merge request !1 from the merge train into main: removed by alice", false},
		{"a conflict", func(tp *trainProject) { tp.f.DropFromTrain(tp.iid, "merge request is not mergeable") },
			"merge request is not mergeable", false},
		{"the source branch was updated", func(tp *trainProject) {
			tp.f.Push("lifecycle/eng-1")
			tp.f.DropFromTrain(tp.iid, "source branch was updated")
		}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp := newTrainProject(t)
			out := tp.merge(t.Context(), tp.pr.HeadSHA)
			tp.parked(t)
			tc.drop(tp)
			tp.clock.Advance(trainPoll)
			o := testenv.Receive(t, 5*time.Second, out, "the end of the merge")
			var refused *lifecycle.RefusedError
			switch {
			case tc.mismatch && !errors.Is(o.err, lifecycle.ErrHeadMismatch):
				t.Errorf("Merge: %v; want ErrHeadMismatch", o.err)
			case !tc.mismatch && (!errors.As(o.err, &refused) || errors.Is(o.err, lifecycle.ErrTemporary) || !strings.Contains(refused.Message, tc.refused)):
				t.Errorf("Merge: %v; want a RefusedError saying %q", o.err, tc.refused)
			}
			if st := tp.f.MergeRequest(tp.iid).State; st != "opened" {
				t.Errorf("the merge request is %s", st)
			}
		})
	}
}

// A merge train takes a merge request whose pipeline is complete: one
// still running waits (temporary, ci_running); a merge at a head that is
// no longer the merge request's is ErrHeadMismatch; merge trains the
// token may not use are refused. None is merged past the train.
func TestMergeTrainRefusals(t *testing.T) {
	t.Parallel()
	tp := newTrainProject(t)
	tp.f.Pipeline(tp.iid, "running")
	_, err := tp.a.Merge(t.Context(), lifecycle.MergeRequest{Ref: tp.pr.PullRequestRef, ExpectedHeadSHA: tp.pr.HeadSHA})
	var te *lifecycle.TemporaryError
	if !errors.As(err, &te) || te.Reason != gitlab.ReasonCIRunning {
		t.Errorf("with the pipeline running: %v; want a TemporaryError, ci_running", err)
	}
	_, err = tp.a.Merge(t.Context(), lifecycle.MergeRequest{Ref: tp.pr.PullRequestRef, ExpectedHeadSHA: gitlabtest.NewSHA()})
	if !errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Errorf("at another head: %v; want ErrHeadMismatch", err)
	}
	tp.f.Inject(gitlabtest.RouteAddTrainCar, gitlabtest.Fault{Status: 403, Body: `{"message":"403 Forbidden"}`})
	tp.f.Pipeline(tp.iid, "success")
	_, err = tp.a.Merge(t.Context(), lifecycle.MergeRequest{Ref: tp.pr.PullRequestRef, ExpectedHeadSHA: tp.pr.HeadSHA})
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, "403 Forbidden") {
		t.Errorf("merge trains forbidden: %v; want a RefusedError in GitLab's words", err)
	}
	if n := tp.f.Calls(gitlabtest.RouteMerge); n != 0 || tp.f.MergeRequest(tp.iid).State != "opened" {
		t.Errorf("merged past the train (%d merge calls)", n)
	}
}

// Without merge trains, a merge is GitLab's merge call.
func TestMergeWithoutMergeTrains(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	f.SettleMergeability()
	if _, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); err != nil {
		t.Fatal(err)
	}
	if calls := f.AllCalls(); calls[gitlabtest.RouteMerge] != 1 || calls[gitlabtest.RouteAddTrainCar]+calls[gitlabtest.RouteGetTrainCar] != 0 {
		t.Errorf("calls %v: want the merge call alone", calls)
	}
}

// mergeRequestOnTrain opens the merge request of task id, its pipeline
// passed, ready for the train.
func (tp *trainProject) mergeRequestOnTrain(t *testing.T, id string) lifecycle.PullRequest {
	t.Helper()
	tp.f.Push("lifecycle/" + strings.ToLower(id))
	pr := ensure(t, tp.a, lifecycle.PullRequestRequest{Task: task(id)})
	tp.f.Pipeline(int64(pr.Number), "success")
	tp.f.SettleMergeability()
	return pr
}

// waitOnTrain merges pr within a short deadline, which the train
// outlasts, and returns the wait.
func (tp *trainProject) waitOnTrain(t *testing.T, pr lifecycle.PullRequest) *lifecycle.TemporaryError {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := tp.a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	var te *lifecycle.TemporaryError
	if !errors.As(err, &te) || te.Reason != gitlab.ReasonMergeTrain {
		t.Fatalf("a merge past its context: %v; want a TemporaryError, merge_train", err)
	}
	return te
}

// A merge that outlasts its context says where its merge request rides:
// its car's position on the train into its target branch (car 1 is
// merged first) and the number of cars, the car's status and its merge
// train pipeline; the train is listed once per merge call, when the wait
// is said, never at the follow's polls.
func TestMergeTrainWaitSaysThePosition(t *testing.T) {
	t.Parallel()
	tp := newTrainProject(t)
	first, last := tp.mergeRequestOnTrain(t, "ENG-2"), tp.mergeRequestOnTrain(t, "ENG-3")
	tp.waitOnTrain(t, first)
	tp.waitOnTrain(t, tp.pr)
	tp.waitOnTrain(t, last)
	_, pipeline, ok := tp.f.TrainCar(tp.iid)
	if !ok {
		t.Fatal("!1 is on no train")
	}
	want := fmt.Sprintf("gitlab: merge request !%d is car 2 of 3 on the merge train into main, fresh, its pipeline %d running: GitLab merges it once the train's pipeline passes", tp.iid, pipeline)
	if te := tp.waitOnTrain(t, tp.pr); te.Err.Error() != want {
		t.Errorf("the wait of the second car:\n got %s\nwant %s", te.Err, want)
	}
	if te := tp.waitOnTrain(t, last); !strings.Contains(te.Err.Error(), "is car 3 of 3 on the merge train into main, fresh") {
		t.Errorf("the wait of the last car: %s", te.Err)
	}
	if n := tp.f.Calls(gitlabtest.RouteListTrain); n != 5 {
		t.Errorf("the train listed %d times by 5 merges, want once each", n)
	}

	// A merge that follows its car through polls lists the train once, at
	// its deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	tp.clock.Advance(time.Second) // apart from the waits of the merges above, which are left pending
	before := tp.f.AllCalls()
	out := tp.merge(ctx, tp.pr.HeadSHA)
	for range 3 {
		if !tp.clock.WaitForWaiterAt(tp.clock.Now().Add(trainPoll), 5*time.Second) {
			t.Fatal("the merge does not wait for its car")
		}
		tp.clock.Advance(trainPoll)
	}
	o := testenv.Receive(t, 5*time.Second, out, "the end of the merge")
	if o.err == nil || !strings.Contains(o.err.Error(), "is car 2 of 3") {
		t.Errorf("after three polls: %v; want the wait of car 2 of 3", o.err)
	}
	after := tp.f.AllCalls()
	if polls, lists := after[gitlabtest.RouteGetTrainCar]-before[gitlabtest.RouteGetTrainCar], after[gitlabtest.RouteListTrain]-before[gitlabtest.RouteListTrain]; polls < 4 || lists != 1 {
		t.Errorf("one merge read its car %d times and listed the train %d times; want 4 or more reads and one list", polls, lists)
	}
}

// The train's list failing, the wait still says the car's status and
// pipeline, without the position, and the merge is temporary as ever.
func TestMergeTrainWaitWithoutTheList(t *testing.T) {
	t.Parallel()
	tp := newTrainProject(t)
	tp.f.Inject(gitlabtest.RouteListTrain, gitlabtest.Fault{Status: http.StatusInternalServerError, Body: `{"message":"500 Internal Server Error"}`})
	te := tp.waitOnTrain(t, tp.pr)
	_, pipeline, _ := tp.f.TrainCar(tp.iid)
	want := fmt.Sprintf("gitlab: merge request !%d is on the merge train into main, fresh, its pipeline %d running: GitLab merges it once the train's pipeline passes", tp.iid, pipeline)
	if te.Err.Error() != want || te.RetryAfter != trainPoll {
		t.Errorf("the wait with the list failing:\n got %s (retry after %s)\nwant %s (retry after %s)", te.Err, te.RetryAfter, want, trainPoll)
	}
	if n := tp.f.Calls(gitlabtest.RouteListTrain); n != 1 {
		t.Errorf("the train listed %d times, want once", n)
	}
}
