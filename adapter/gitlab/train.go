package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// GitLab's merge train car statuses (the Merge Trains API's status): on
// the train (idle: waiting for its pipeline; stale: its pipeline is
// outdated and made again; fresh: its pipeline runs on the train's merged
// result; merging), or done (merged, or skip_merged: merged at once,
// past the train).
const (
	carMerged     = "merged"
	carSkipMerged = "skip_merged"
)

// mergeByTrain merges a merge request of a project with merge trains,
// where GitLab's merge call would merge it past the train: it adds the
// merge request to its target branch's train at the expected head
// (POST .../merge_trains/merge_requests/:iid with sha), or finds it on it
// (GET .../merge_trains/merge_requests/:iid), and follows its car every
// Config.MergeTrainPollInterval until GitLab merges it (the merge
// commit), drops it (see trainRemoval), or ctx ends: then it returns a
// *lifecycle.TemporaryError whose Reason is merge_train, saying where the
// car rides (see trainWait), and the next Merge follows the same car.
func (a *Adapter) mergeByTrain(ctx context.Context, s *settings, req lifecycle.MergeRequest, want string) (lifecycle.MergeResult, error) {
	iid := int64(req.Ref.Number)
	car, err := a.trainCar(ctx, s, iid)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	switch {
	case car != nil && (car.Status == carMerged || car.Status == carSkipMerged):
		return a.trainMerged(ctx, req, want, true)
	case car == nil:
		opt := &gl.AddMergeRequestToMergeTrainOptions{SHA: &want, Squash: gl.Ptr(a.cfg.Merge.Squash)}
		train, resp, err := a.client.MergeTrains.AddMergeRequestToMergeTrain(s.id, iid, opt, gl.WithContext(ctx))
		if err != nil {
			return a.notOnTrain(ctx, s, req, want, resp, err)
		}
		car = carOf(train, iid) // the answer is the train: its target branch, for the wait's message
	}
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: ReasonMergeTrain, RetryAfter: a.cfg.MergeTrainPollInterval,
					Err: errors.New(a.trainWait(ctx, s, iid, car))}
			}
			return lifecycle.MergeResult{}, fmt.Errorf("gitlab: follow merge request !%d on its merge train: %w", iid, ctx.Err())
		case <-a.clock.After(a.cfg.MergeTrainPollInterval):
		}
		if car, err = a.trainCar(ctx, s, iid); err != nil {
			if ctx.Err() != nil {
				continue // the deadline: said above
			}
			return lifecycle.MergeResult{}, err
		}
		switch {
		case car == nil:
			return a.offTrain(ctx, s, req, want)
		case car.Status == carMerged || car.Status == carSkipMerged:
			return a.trainMerged(ctx, req, want, false)
		}
	}
}

// trainCar reads merge request iid's merge train car, or nil when it has
// none: it was never added, or GitLab dropped it (GitLab destroys the car
// of a merge request it removes from the train).
func (a *Adapter) trainCar(ctx context.Context, s *settings, iid int64) (*gl.MergeTrain, error) {
	car, resp, err := a.client.MergeTrains.GetMergeRequestOnAMergeTrain(s.id, iid, gl.WithContext(ctx))
	if err != nil {
		err = a.fail(ctx, fmt.Sprintf("read the merge train car of merge request !%d", iid), resp, err)
		if errors.Is(err, lifecycle.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return car, nil
}

// carOf returns merge request iid's car among a train's, or nil.
func carOf(train []*gl.MergeTrain, iid int64) *gl.MergeTrain {
	if i := carIndex(train, iid); i >= 0 {
		return train[i]
	}
	return nil
}

// carIndex returns the index of merge request iid's car among a train's,
// or -1.
func carIndex(train []*gl.MergeTrain, iid int64) int {
	return slices.IndexFunc(train, func(c *gl.MergeTrain) bool {
		return c != nil && c.MergeRequest != nil && c.MergeRequest.IID == iid
	})
}

// Bounds of the reading of a merge train for a car's position (see
// trainWait): pages of trainPage cars (GitLab's largest per_page), at
// most trainPages of them (the Adapter's own, which tests lower), within
// trainListTimeout.
const (
	trainPage        = 100
	trainPages       = 5
	trainListTimeout = 5 * time.Second
)

// trainWait says where merge request iid rides on its merge train, for
// the *lifecycle.TemporaryError of a merge whose ctx ended while it
// waits: its car's position on the train into its target branch and the
// number of cars, its status (idle, stale, fresh, merging) and its merge
// train pipeline ("merge request !12 is car 2 of 3 on the merge train
// into main, fresh, its pipeline 456 running: ..."). The position comes
// from one list of the train (GitLab's "List merge requests in a merge
// train", scope active, sort asc: the car merged first is car 1), read
// with a context of its own, since ctx has ended, page after page until
// the car is found, at most trainPages of trainPage: "beyond car 500"
// past them. That list failing, the message says the car's status and
// pipeline from car alone (nil: the car not read yet, it waits), without
// the position.
func (a *Adapter) trainWait(ctx context.Context, s *settings, iid int64, car *gl.MergeTrain) string {
	const then = ": GitLab merges it once the train's pipeline passes"
	if car == nil {
		return fmt.Sprintf("gitlab: merge request !%d is on the merge train into its target branch, and waits%s", iid, then)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trainListTimeout)
	defer cancel()
	where := "on the merge train into " + car.TargetBranch
	switch pos, err := a.trainPosition(lctx, s, iid, car.TargetBranch); {
	case err != nil:
		a.log.WarnContext(ctx, "GitLab merge train not read: the wait's message says no position", "merge_request", iid, "err", err)
	case pos.car != nil && pos.of > 0:
		car, where = pos.car, fmt.Sprintf("car %d of %d on the merge train into %s", pos.at, pos.of, car.TargetBranch)
	case pos.car != nil:
		car, where = pos.car, fmt.Sprintf("car %d on the merge train into %s", pos.at, car.TargetBranch)
	case pos.beyond > 0 && pos.of > pos.beyond:
		where = fmt.Sprintf("beyond car %d of %d on the merge train into %s", pos.beyond, pos.of, car.TargetBranch)
	case pos.beyond > 0:
		where = fmt.Sprintf("beyond car %d on the merge train into %s", pos.beyond, car.TargetBranch)
	}
	msg := fmt.Sprintf("gitlab: merge request !%d is %s, %s", iid, where, car.Status)
	if p := car.Pipeline; p != nil {
		msg += fmt.Sprintf(", its pipeline %d %s", p.ID, p.Status)
	}
	return msg + then
}

// trainSpot is a car's place on its merge train: car is its car as the
// train's list shows it, at position at of the train's of cars (0:
// unknown, GitLab counts no further than 10,000); or, car nil, beyond is
// the number of cars read without finding it (0: the whole train was
// read, and the car is not on it any more).
type trainSpot struct {
	car    *gl.MergeTrain
	at, of int
	beyond int
}

// trainPosition reads the merge train into target, in train order, until
// merge request iid's car is found, at most a.trainPages pages of
// a.trainPage cars.
func (a *Adapter) trainPosition(ctx context.Context, s *settings, iid int64, target string) (trainSpot, error) {
	opt := &gl.ListMergeTrainsOptions{Scope: gl.Ptr("active"), Sort: gl.Ptr("asc"), ListOptions: gl.ListOptions{PerPage: int64(a.trainPage), Page: 1}}
	var spot trainSpot
	read := 0
	for range a.trainPages {
		cars, resp, err := a.client.MergeTrains.ListMergeRequestInMergeTrain(s.id, target, opt, gl.WithContext(ctx))
		if err != nil {
			return trainSpot{}, a.fail(ctx, fmt.Sprintf("list the merge train into %s", target), resp, err)
		}
		spot.of = int(resp.TotalItems) // 0 past 10,000 cars: GitLab leaves X-Total out
		if resp.NextPage == 0 {
			spot.of = read + len(cars)
		}
		if i := carIndex(cars, iid); i >= 0 {
			spot.car, spot.at = cars[i], read+i+1
			return spot, nil
		}
		read += len(cars)
		if resp.NextPage == 0 {
			return trainSpot{}, nil
		}
		opt.Page = resp.NextPage
	}
	spot.beyond = read
	return spot, nil
}

// trainMerged reads a merge request its merge train merged: merged at want
// is the merge commit; at another head, ErrHeadMismatch.
func (a *Adapter) trainMerged(ctx context.Context, req lifecycle.MergeRequest, want string, before bool) (lifecycle.MergeResult, error) {
	_, mr, err := a.read(ctx, req.Ref)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	switch {
	case mr.State != "merged":
		return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: ReasonMerging,
			Err: fmt.Errorf("gitlab: the merge train merged merge request !%d, which is still %s", mr.IID, mr.State)}
	case !strings.EqualFold(mr.SHA, want):
		return lifecycle.MergeResult{}, fmt.Errorf("gitlab: merge request !%d is merged at %s, not %s: %w", mr.IID, mr.SHA, want, lifecycle.ErrHeadMismatch)
	}
	return lifecycle.MergeResult{MergeCommitSHA: mergeCommit(&mr.BasicMergeRequest), AlreadyMerged: before}, nil
}

// notOnTrain answers a merge train that did not take a merge request:
// 409 at another head is ErrHeadMismatch; 403 (merge trains not
// available to the token or the project) a *lifecycle.RefusedError;
// 400 (GitLab cannot merge it) reads the merge request: merged at want is
// a success, a head pipeline that still runs (GitLab's merge train takes
// a merge request whose pipeline is complete) or a mergeability that
// passes by itself temporary, anything else a refusal in GitLab's words.
func (a *Adapter) notOnTrain(ctx context.Context, s *settings, req lifecycle.MergeRequest, want string, resp *gl.Response, err error) (lifecycle.MergeResult, error) {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	msg := message(err)
	switch status {
	case http.StatusConflict, http.StatusBadRequest:
		_, mr, rerr := a.read(ctx, req.Ref)
		if rerr != nil {
			return lifecycle.MergeResult{}, rerr
		}
		switch {
		case mr.State == "merged" && strings.EqualFold(mr.SHA, want):
			return lifecycle.MergeResult{MergeCommitSHA: mergeCommit(&mr.BasicMergeRequest), AlreadyMerged: true}, nil
		case !strings.EqualFold(mr.SHA, want):
			return lifecycle.MergeResult{}, fmt.Errorf("gitlab: add merge request !%d to the merge train at %s: %s: %w", req.Ref.Number, want, msg, lifecycle.ErrHeadMismatch)
		case mr.State == "opened" && mr.HeadPipeline != nil && !finished(mr.HeadPipeline.Status):
			return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: ReasonCIRunning,
				Err: fmt.Errorf("gitlab: merge request !%d is not on the merge train yet: its pipeline is %s, and GitLab adds a merge request whose pipeline is complete (%s)", mr.IID, mr.HeadPipeline.Status, msg)}
		case mr.State == "opened" && passing(mr.DetailedMergeStatus):
			return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: waitReason(mr.DetailedMergeStatus),
				Err: fmt.Errorf("gitlab: merge request !%d cannot be added to the merge train yet: %s (detailed_merge_status %s: %s)", mr.IID, msg, mr.DetailedMergeStatus, mergeBlock(mr.DetailedMergeStatus))}
		}
		return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: strings.Replace(refusal(mr, msg), "refused to merge", "refused to add to the merge train", 1)}
	case http.StatusForbidden:
		return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: fmt.Sprintf("GitLab refused to add merge request !%d to the merge train: %s (merge trains are not available to this token, or the project's tier)", req.Ref.Number, msg)}
	}
	return lifecycle.MergeResult{}, a.fail(ctx, fmt.Sprintf("add merge request !%d to the merge train", req.Ref.Number), resp, err)
}

// offTrain reads a merge request whose car is gone: merged (the train
// merged it and GitLab let the car go, or someone merged it past the
// train) is a success at want; still open, GitLab dropped it from the
// train (see trainRemoval).
func (a *Adapter) offTrain(ctx context.Context, s *settings, req lifecycle.MergeRequest, want string) (lifecycle.MergeResult, error) {
	_, mr, err := a.read(ctx, req.Ref)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	if mr.State == "merged" {
		if !strings.EqualFold(mr.SHA, want) {
			return lifecycle.MergeResult{}, fmt.Errorf("gitlab: merge request !%d is merged at %s, not %s: %w", mr.IID, mr.SHA, want, lifecycle.ErrHeadMismatch)
		}
		return lifecycle.MergeResult{MergeCommitSHA: mergeCommit(&mr.BasicMergeRequest)}, nil
	}
	return lifecycle.MergeResult{}, a.trainRemoval(ctx, s, mr, want)
}

// trainRemovalNotes bounds the notes read for GitLab's reason of a
// removal from a merge train: its system note comes with the removal, so
// it is among the newest.
const trainRemovalNotes = 20

// trainRemoval says why GitLab dropped merge request mr from its merge
// train, in GitLab's words: its system note "removed this merge request
// from the merge train because <reason>" (or "aborted ..."; GitLab's
// documentation, "Merge request dropped from the merge train", points to
// it), read from the newest notes. The removal is final: a
// *lifecycle.RefusedError naming the reason, and the ship is asked for
// again once what GitLab names is mended (Mergify and Tide also report a
// queue's removal rather than queueing again); except when the source
// branch moved (a head other than want: GitLab drops a car whose source
// branch was updated), which is ErrHeadMismatch. The notes unreadable
// for a moment, it is temporary.
func (a *Adapter) trainRemoval(ctx context.Context, s *settings, mr *gl.MergeRequest, want string) error {
	if !strings.EqualFold(mr.SHA, want) {
		return fmt.Errorf("gitlab: merge request !%d left the merge train: its head is %s, not %s: %w", mr.IID, mr.SHA, want, lifecycle.ErrHeadMismatch)
	}
	notes, resp, err := a.client.Notes.ListMergeRequestNotes(s.id, mr.IID, &gl.ListMergeRequestNotesOptions{
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("desc"), ListOptions: gl.ListOptions{PerPage: trainRemovalNotes},
	}, gl.WithContext(ctx))
	if err != nil {
		err = a.fail(ctx, fmt.Sprintf("read why merge request !%d left the merge train", mr.IID), resp, err)
		return &lifecycle.TemporaryError{Reason: ReasonMergeTrain, Err: err}
	}
	why := "GitLab gave no reason"
notes:
	for _, n := range notes {
		if n == nil || !n.System {
			continue
		}
		for _, verb := range []string{"removed", "aborted"} {
			if rest, ok := strings.CutPrefix(n.Body, verb+" this merge request from the merge train"); ok {
				switch why = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "because")); {
				case why != "":
				case n.Author.Username != "":
					why = verb + " by " + n.Author.Username
				default:
					why = verb + " by a person"
				}
				break notes
			}
		}
	}
	return &lifecycle.RefusedError{Message: fmt.Sprintf("GitLab removed merge request !%d from the merge train into %s: %s", mr.IID, mr.TargetBranch, why)}
}
