package lifecycle

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// decide returns the decision the reviews of a submission reach under
// policy, and whether the latest decisive review (approved or changes
// requested) that counts asked for changes, which lets the agent start
// rework.
//
// always_require counts only the participants of the review route (anyone,
// when the route is empty): the decision is changes_requested when a
// participant's latest decisive review asked for changes, approved when
// one approved and none asks for changes, else pending. github_rules,
// without a host that decides, does the same over every reviewer. When
// stale approvals are dismissed (the host's rule, see
// [PullRequest.DismissesStaleReviews]), approvals made at another head
// than head do not count.
func decide(policy CodeReviewPolicy, participants []Participant, reviews []Review, head string, dismissStale bool) (ReviewDecision, bool) {
	latest := map[string]ReviewOutcome{} // reviewer -> latest decisive outcome
	var order []string
	rework := false
	for _, r := range reviews {
		if r.Outcome == ReviewCommented {
			continue
		}
		if policy == PolicyAlwaysRequire && len(participants) > 0 &&
			!slices.ContainsFunc(participants, func(p Participant) bool { return p.ID == r.Reviewer.ID }) {
			continue
		}
		if r.Outcome == ReviewApproved && dismissStale && r.HeadSHA != "" && r.HeadSHA != head {
			continue
		}
		rework = r.Outcome == ReviewChangesRequested
		if _, seen := latest[r.Reviewer.ID]; !seen {
			order = append(order, r.Reviewer.ID)
		}
		latest[r.Reviewer.ID] = r.Outcome
	}
	if policy == PolicyNeverRequire {
		return DecisionNotRequired, rework
	}
	decision := DecisionPending
	for _, id := range order {
		switch latest[id] {
		case ReviewChangesRequested:
			return DecisionChangesRequested, rework
		case ReviewApproved:
			decision = DecisionApproved
		}
	}
	return decision, rework
}

// redecide recomputes the decision reached by the reviews tx holds for t's
// latest submission.
func (s *Service) redecide(ctx context.Context, tx Tx, t *Task) error {
	if t.SubmissionID == nil {
		return nil
	}
	sub, err := tx.Submission(ctx, *t.SubmissionID)
	if err != nil {
		return fmt.Errorf("submission of task %s: %w", t.ID, err)
	}
	reviews, err := tx.Reviews(ctx, sub.SubmissionID)
	if err != nil {
		return fmt.Errorf("reviews of task %s: %w", t.ID, err)
	}
	head := ""
	if t.HeadSHA != nil {
		head = *t.HeadSHA
	}
	t.ReviewDecision, t.ReworkRequested = decide(sub.CodeReviewPolicy, sub.ReviewRoute.Participants, reviews, head, t.Facts.DismissesStaleReviews)
	return nil
}

// ReviewRouter decides who reviews a submission and under which policy.
// [ReviewRules] is the included implementation.
type ReviewRouter interface {
	// RouteReview returns the review plan of a submission. An error fails
	// the submission with 500.
	RouteReview(ctx context.Context, req ReviewRouteRequest) (ReviewPlan, error)
}

// ReviewRouteRequest is what a ReviewRouter knows of a submission.
type ReviewRouteRequest struct {
	// Task is the submitted task.
	Task Task
	// PullRequest is the pull request the submission made or reused.
	PullRequest PullRequest
	// Reviewers are the logins the agent asked for (pullRequest.reviewers).
	Reviewers []string
}

// ReviewPlan is a ReviewRouter's decision.
type ReviewPlan struct {
	// Policy is the submission's codeReviewPolicy.
	Policy CodeReviewPolicy
	// Participants review the submission.
	Participants []Participant
}

// ReviewRules routes reviews by project: each project's policy and
// reviewers, or, for a project with no reviewers configured, the pull
// request's requested reviewers mapped from logins to agents.
type ReviewRules struct {
	// Projects holds the review plan of each project.
	Projects map[string]ReviewPlan
	// Default is the plan of projects not in Projects. Its Policy defaults
	// to github_rules.
	Default ReviewPlan
	// Logins maps a host login to the agent that reviews as it. A login
	// not in the map reviews as an agent with the login as its ID.
	Logins map[string]string
}

var _ ReviewRouter = ReviewRules{}

// RouteReview implements ReviewRouter.
func (r ReviewRules) RouteReview(ctx context.Context, req ReviewRouteRequest) (ReviewPlan, error) {
	plan, ok := r.Projects[req.Task.Project()]
	if !ok {
		plan = r.Default
	}
	if plan.Policy == "" {
		plan.Policy = PolicyGitHubRules
	}
	if len(plan.Participants) > 0 {
		plan.Participants = slices.Clone(plan.Participants)
		return plan, nil
	}
	plan.Participants = []Participant{}
	for _, login := range append(slices.Clone(req.PullRequest.RequestedReviewers), req.Reviewers...) {
		agent := login
		if mapped, ok := r.Logins[login]; ok {
			agent = mapped
		}
		if !slices.ContainsFunc(plan.Participants, func(p Participant) bool { return p.ID == agent }) {
			plan.Participants = append(plan.Participants, Participant{ID: agent, Role: "reviewer"})
		}
	}
	return plan, nil
}

// PostReviewParams is a reviewer's verdict. Its JSON form is the body of
// POST /tasks/{id}/reviews.
type PostReviewParams struct {
	// Outcome is approved, changes_requested or commented. Required.
	Outcome ReviewOutcome `json:"outcome"`
	// Body is the reviewer's text, at most 10,000 characters.
	Body string `json:"body"`
	// Reviewer is who reviews.
	Reviewer Actor `json:"-"`
}

// maxReviewBodyLen bounds a review's body.
const maxReviewBodyLen = 10000

func (p *PostReviewParams) validate() error {
	var v lifecycletype.Validator
	if !p.Outcome.Valid() {
		v.Add("outcome", "must be one of approved, changes_requested, commented")
	}
	v.MaxLen("body", p.Body, maxReviewBodyLen)
	return v.Err()
}

// PostReview records a review of a task's latest submission, updates the
// review decision and emits task.reviewed. The task must be in review.
// While its ship operation is merging, reviews are refused with a
// *ConflictError (ship_in_progress): they could no longer change anything.
// A changes_requested review posted while a ship operation is queued makes
// that operation fail (review_not_approved) instead of merging.
func (s *Service) PostReview(ctx context.Context, taskID string, p PostReviewParams) (Review, []Action, error) {
	if err := p.validate(); err != nil {
		return Review{}, nil, err
	}
	var review Review
	t, err := s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		if err := s.answer(t, ask{cmd: cmdReview}); err != nil {
			return taskEvent{}, err
		}
		review = Review{ID: id.New("rev_"), Reviewer: p.Reviewer, Outcome: p.Outcome, Body: p.Body,
			SubmittedAt: s.now(), TaskID: t.ID, SubmissionID: *t.SubmissionID}
		if t.HeadSHA != nil {
			review.HeadSHA = *t.HeadSHA
		}
		if err := tx.CreateReview(ctx, review); err != nil {
			return taskEvent{}, fmt.Errorf("record review: %w", err)
		}
		if err := s.redecide(ctx, tx, t); err != nil {
			return taskEvent{}, err
		}
		return taskEvent{typ: EventTaskReviewed, actor: p.Reviewer, reviewOutcome: p.Outcome,
			summary: fmt.Sprintf("Task %s reviewed by %s: %s", t.Identifier, p.Reviewer.ID, p.Outcome)}, nil
	})
	if err != nil {
		return Review{}, nil, err
	}
	return review, t.AvailableActions, nil
}

// ReviewFeedback is the review state of a task's latest submission, as
// served by GET /tasks/{id}/review-feedback.
type ReviewFeedback struct {
	Decision ReviewDecision `json:"decision"`
	Reviews  []Review       `json:"reviews"`
}

// ReviewFeedback returns the decision on a task's latest submission and
// its reviews, oldest first, as last learned: it never calls the host.
func (s *Service) ReviewFeedback(ctx context.Context, taskID string) (ReviewFeedback, []Action, error) {
	t, err := s.readTask(ctx, taskID)
	if err != nil {
		return ReviewFeedback{}, nil, err
	}
	decision := t.Decision()
	fb := ReviewFeedback{Decision: decision, Reviews: []Review{}}
	if t.SubmissionID == nil {
		return fb, t.AvailableActions, nil
	}
	reviews, err := s.store.Reviews(ctx, *t.SubmissionID)
	if err != nil {
		return ReviewFeedback{}, nil, fmt.Errorf("reviews of task %s: %w", t.ID, err)
	}
	fb.Reviews = httpapi.NonNil(reviews)
	return fb, t.AvailableActions, nil
}

func (s *Service) handlePostReview(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params PostReviewParams
	if err := httpapi.DecodeAndCheck(w, r, &params, false, params.validate); err != nil {
		return err
	}
	params.Reviewer = p.Actor
	review, acts, err := s.PostReview(httpapi.RequestContext(r), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusCreated, struct {
		Data             Review   `json:"data"`
		AvailableActions []Action `json:"availableActions"`
	}{review, acts})
	return nil
}

func (s *Service) handleReviewFeedback(w http.ResponseWriter, r *http.Request, p *Principal) error {
	fb, acts, err := s.ReviewFeedback(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Data             ReviewFeedback `json:"data"`
		AvailableActions []Action       `json:"availableActions"`
	}{fb, acts})
	return nil
}
