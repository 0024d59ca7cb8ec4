package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Limits of a submission (docs/api.md, "Limits").
const (
	maxSummaryLen   = 2000
	maxNotesLen     = 2000
	maxPRTitleLen   = 300
	maxPRBodyLen    = 10000
	maxReviewers    = 20
	maxLoginLen     = 100
	maxBranchLen    = 255
	submitRoute     = "/tasks/{id}/submit"
	maxCheckNameLen = 200
)

// PullRequestHints are an agent's wishes for the pull request of an
// adapter-managed submission.
type PullRequestHints struct {
	// Title is at most 300 characters.
	Title string `json:"title"`
	// Body is at most 10,000 characters.
	Body string `json:"body"`
	// Draft opens a draft pull request.
	Draft bool `json:"draft"`
	// Head overrides the configured source branch.
	Head string `json:"head"`
	// Base overrides the configured target branch.
	Base string `json:"base"`
	// Reviewers are up to 20 login names.
	Reviewers []string `json:"reviewers"`
}

// SubmitParams is an agent's submission of finished work. Its JSON form is
// the body of POST /tasks/{id}/submit.
type SubmitParams struct {
	// Summary says what was done. Required, at most 2000 characters.
	Summary string `json:"summary"`
	// Mode defaults to adapter_managed.
	Mode SubmitMode `json:"mode"`
	// PullRequest holds hints for the adapter.
	PullRequest PullRequestHints `json:"pullRequest"`
	// Checks are self-reported check results.
	Checks []SubmittedCheck `json:"checks"`
	// Notes are internal notes, at most 2000 characters.
	Notes string `json:"notes"`

	// IdempotencyKey, when set (8 to 128 visible ASCII characters), makes
	// the call idempotent as POST /tasks/{id}/submit is (see
	// [Service.Submit]); it is recorded in the submission.
	IdempotencyKey string `json:"-"`
	// Actor submits.
	Actor Actor `json:"-"`
}

func (p *SubmitParams) validate() error {
	var v lifecycletype.Validator
	if strings.TrimSpace(p.Summary) == "" {
		v.Add("summary", "is required")
	}
	v.MaxLen("summary", p.Summary, maxSummaryLen)
	switch p.Mode {
	case "":
		p.Mode = ModeAdapterManaged
	case ModeAdapterManaged, ModeArtifact:
	default:
		v.Add("mode", "must be adapter_managed or artifact")
	}
	pr := &p.PullRequest
	v.MaxLen("pullRequest.title", pr.Title, maxPRTitleLen)
	v.MaxLen("pullRequest.body", pr.Body, maxPRBodyLen)
	if pr.Head != "" && !validBranch(pr.Head) {
		v.Add("pullRequest.head", "must be a valid branch name")
	}
	if pr.Base != "" && !validBranch(pr.Base) {
		v.Add("pullRequest.base", "must be a valid branch name")
	}
	if len(pr.Reviewers) > maxReviewers {
		v.Add("pullRequest.reviewers", fmt.Sprintf("at most %d entries", maxReviewers))
	}
	for i, login := range pr.Reviewers {
		if login == "" || strings.ContainsFunc(login, func(r rune) bool { return r <= ' ' }) {
			v.Add(fmt.Sprintf("pullRequest.reviewers[%d]", i), "must be a login name without spaces")
		}
		v.MaxLen(fmt.Sprintf("pullRequest.reviewers[%d]", i), login, maxLoginLen)
	}
	if len(p.Checks) > maxChecks {
		v.Add("checks", fmt.Sprintf("at most %d entries", maxChecks))
	}
	for i, c := range p.Checks {
		validateCheck(&v, fmt.Sprintf("checks[%d]", i), c.Name, c.Status)
		validateFailure(&v, fmt.Sprintf("checks[%d]", i), c.Failure, c.Status)
	}
	v.MaxLen("notes", p.Notes, maxNotesLen)
	return v.Err()
}

// validBranch reports whether s is an acceptable git branch name: no
// control characters, spaces or the characters git forbids in refs.
func validBranch(s string) bool {
	if len(s) > maxBranchLen || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") ||
		strings.HasSuffix(s, ".lock") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") || strings.Contains(s, "//") || strings.Contains(s, "@{") {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r)
	})
}

// AdapterBinding makes an adapter live for the tasks of a project.
type AdapterBinding struct {
	// Project names the tasks' project; "" binds the tasks of every project
	// that no other binding names, and those without a project.
	Project string
	// Adapter opens and merges their pull requests. Required.
	Adapter ProviderAdapter
	// CI reports their CI. When nil, the Adapter does if it is a
	// CIProvider, else Config.CIProvider.
	CI CIProvider
	// CIRequired says whether the repositories of these tasks have CI.
	// Nil means they do: a task ships once its CI passed. Pointing to
	// false declares a repository without CI: a task whose CI is none (or
	// pending, with no check reported) ships too, while a check that runs
	// or failed still holds it.
	CIRequired *bool
}

// ciRequired reports whether b's repositories have CI.
func (b *AdapterBinding) ciRequired() bool { return b.CIRequired == nil || *b.CIRequired }

// binding returns the binding live for a project, or nil.
func (s *Service) binding(project string) *AdapterBinding {
	var fallback *AdapterBinding
	for i := range s.cfg.Adapters {
		b := &s.cfg.Adapters[i]
		if b.Project == project && project != "" {
			return b
		}
		if b.Project == "" {
			fallback = b
		}
	}
	return fallback
}

// adapterFor returns the adapter that handles t's submissions in mode. It
// returns an error matching ErrNotFound when none is configured.
func (s *Service) adapterFor(t *Task, mode SubmitMode) (ProviderAdapter, error) {
	if mode == ModeArtifact {
		if s.cfg.ArtifactAdapter == nil {
			return nil, errNoAdapter(t, mode)
		}
		return s.cfg.ArtifactAdapter, nil
	}
	if b := s.binding(t.Project()); b != nil {
		return b.Adapter, nil
	}
	return nil, errNoAdapter(t, mode)
}

// errNoAdapter is the error of a submission of t in mode that no adapter
// takes. It matches ErrNotFound.
func errNoAdapter(t *Task, mode SubmitMode) error {
	if mode == ModeArtifact {
		return fmt.Errorf("artifact submissions are not enabled on this service: %w", ErrNotFound)
	}
	return fmt.Errorf("no live provider adapter matches task %s (project %q): %w", t.Identifier, t.Project(), ErrNotFound)
}

// ciFor returns the CI provider of t's latest submission, or nil.
func (s *Service) ciFor(t *Task) CIProvider {
	var adapter ProviderAdapter
	if t.SubmissionMode == ModeArtifact {
		adapter = s.cfg.ArtifactAdapter
	} else if b := s.binding(t.Project()); b != nil {
		if b.CI != nil {
			return b.CI
		}
		adapter = b.Adapter
	}
	if ci, ok := adapter.(CIProvider); ok {
		return ci
	}
	return s.cfg.CIProvider
}

// providerError wraps an adapter failure for the HTTP layer (502). An
// adapter's *ValidationError (a hint it cannot use) stays a 400.
func (s *Service) providerError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	if errors.Is(err, ErrValidation) {
		return err
	}
	return &ProviderError{Op: op, Err: err}
}

// Submit submits a task's finished work: the task's live adapter creates
// or reuses its pull request (or, in artifact mode, the artifact adapter
// records the submission), reviewers are routed, the CI and review state
// of the pull request's head are read, and the task moves to in_review
// with task.updated. It returns a *ConflictError when submit is not an
// available action, an error matching ErrNotFound when no adapter handles
// the task, and a *ProviderError when the adapter fails.
//
// With p.IdempotencyKey set, a retry with the same key and parameters
// returns the first call's submission without submitting again, and the
// same key with other parameters is a *ConflictError
// (idempotency_key_reused), as with POST /tasks/{id}/submit.
func (s *Service) Submit(ctx context.Context, taskID string, p SubmitParams) (Submission, error) {
	if err := p.validate(); err != nil {
		return Submission{}, err
	}
	unlock, err := s.taskLocks.lock(ctx, taskID)
	if err != nil {
		return Submission{}, err
	}
	defer unlock()
	return goIdempotentData(s, ctx, p.Actor, submitRoute, taskID, p.IdempotencyKey, p,
		func(sub *Submission) any { return submissionEnvelope{sub, sub.AvailableActions} },
		func(ctx context.Context, respond func(Tx, *Submission) error) (Submission, error) {
			return s.submitLocked(ctx, taskID, p, respond)
		})
}

// submitLocked is Submit, with the task's lock held, with a hook that
// runs in the transaction that accepts the submission (the idempotency
// layer records the response there).
// p has been validated: by Submit, or by the HTTP layer's decoding.
func (s *Service) submitLocked(ctx context.Context, taskID string, p SubmitParams, onCommit func(tx Tx, sub *Submission) error) (Submission, error) {
	t, err := s.Task(ctx, taskID)
	if err != nil {
		return Submission{}, err
	}
	if err := s.answer(&t, ask{cmd: cmdSubmit, mode: p.Mode}); err != nil {
		return Submission{}, err
	}
	adapter, err := s.adapterFor(&t, p.Mode)
	if err != nil {
		return Submission{}, err
	}
	req := PullRequestRequest{
		Task:         t,
		SubmissionID: id.New("sub_"),
		Head:         p.PullRequest.Head,
		Base:         p.PullRequest.Base,
		Title:        p.PullRequest.Title,
		Body:         p.PullRequest.Body,
		Draft:        p.PullRequest.Draft,
		Reviewers:    p.PullRequest.Reviewers,
		Summary:      p.Summary,
		Notes:        p.Notes,
		Checks:       p.Checks,
	}
	if req.Head == "" && t.Branch != nil {
		req.Head = *t.Branch // rework goes on the same branch
	}
	if req.Base == "" && t.BaseBranch != nil {
		req.Base = *t.BaseBranch
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	pr, err := adapter.EnsurePullRequest(actx, req)
	if err != nil {
		return Submission{}, s.providerError(ctx, "open pull request", err)
	}
	if pr.Number < 1 || pr.URL == "" || !shaRE.MatchString(pr.HeadSHA) {
		return Submission{}, s.providerError(ctx, "open pull request", fmt.Errorf("the adapter returned an incomplete pull request %+v", pr))
	}
	pr.HeadSHA = lowerHex(pr.HeadSHA)
	if pr.State == "" {
		pr.State = PullRequestOpen
	}
	plan, err := s.cfg.ReviewRouter.RouteReview(ctx, ReviewRouteRequest{Task: t, PullRequest: pr, Reviewers: p.PullRequest.Reviewers})
	if err != nil {
		return Submission{}, fmt.Errorf("route review of task %s: %w", t.ID, err)
	}
	if !plan.Policy.Valid() {
		return Submission{}, fmt.Errorf("route review of task %s: invalid policy %q", t.ID, plan.Policy)
	}
	// Learn the CI and review state of the head now, so that the task's
	// first read in review already shows them; what cannot be read now is
	// read by the reconciler.
	t.ReviewPolicy = plan.Policy
	obs := s.firstReading(actx, adapter, t, pr)
	pr.Mergeable, pr.Draft = obs.pr.Mergeable, obs.pr.Draft

	sub := Submission{
		SubmissionID:     req.SubmissionID,
		TaskID:           t.ID,
		Status:           moves[moveSubmit],
		PRURL:            pr.URL,
		PRNumber:         pr.Number,
		Head:             optional(pr.Head),
		Base:             optional(pr.Base),
		HeadSHA:          &pr.HeadSHA,
		Action:           SubmissionExisting,
		IdempotencyKey:   p.IdempotencyKey,
		Owner:            optional(pr.Owner),
		Repo:             optional(pr.Repo),
		CodeReviewPolicy: plan.Policy,
		ReviewRoute:      ReviewRoute{Participants: httpapi.NonNil(plan.Participants)},
		AcceptedAt:       s.now(),
		Mode:             p.Mode,
		Summary:          p.Summary,
		Notes:            p.Notes,
		Checks:           httpapi.NonNil(p.Checks),
		Draft:            p.PullRequest.Draft,
		Actor:            p.Actor,
	}
	switch {
	case p.Mode == ModeArtifact:
		sub.Action = SubmissionAccepted
	case pr.Created:
		sub.Action = SubmissionCreated
	}
	loaded := t
	_, err = s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		if t.Version != loaded.Version {
			return taskEvent{}, &ConflictError{
				Reason:           "task_changed",
				Message:          fmt.Sprintf("Task %s changed while its pull request was prepared (it was %s, it is %s now); read it and submit again if submit is offered", t.Identifier, loaded.Status, t.Status),
				AvailableActions: t.AvailableActions,
			}
		}
		if err := tx.CreateSubmission(ctx, sub); err != nil {
			return taskEvent{}, fmt.Errorf("record submission: %w", err)
		}
		checks := make([]Check, len(p.Checks))
		for i, c := range p.Checks {
			checks[i] = Check{TaskID: t.ID, HeadSHA: pr.HeadSHA, Source: SourceSelfReported, Name: c.Name, Status: c.Status, Failure: c.Failure, UpdatedAt: sub.AcceptedAt}
		}
		if err := tx.PutChecks(ctx, PutChecksParams{TaskID: t.ID, HeadSHA: pr.HeadSHA, Source: SourceSelfReported, Checks: checks}); err != nil {
			return taskEvent{}, fmt.Errorf("record self-reported checks: %w", err)
		}
		if err := s.putCIFailures(ctx, tx, t.ID, pr.HeadSHA, checks, true); err != nil {
			return taskEvent{}, err
		}
		moveTask(t, moveSubmit)
		t.SubmissionID, t.PRURL, t.PRNumber = &sub.SubmissionID, &sub.PRURL, &sub.PRNumber
		t.Branch, t.BaseBranch = sub.Head, sub.Base
		t.SubmissionMode, t.PROwner, t.PRRepo = p.Mode, pr.Owner, pr.Repo
		t.ReviewPolicy, t.ReviewDecision, t.ReworkRequested = plan.Policy, DecisionPending, false
		t.Facts = Facts{}
		t.HeadSHA = nil // so that applyFacts sees the head as new
		if _, err := s.applyFacts(ctx, &newSubmissionTx{Tx: tx, sub: &sub}, t, obs, true); err != nil {
			return taskEvent{}, err
		}
		_, decides := hostDecides(adapter, t)
		reviewsUnread := (decides || (obs.reviewsFailed && t.ReviewPolicy == PolicyGitHubRules)) && obs.reviews == nil
		if reviewsUnread {
			t.Facts.HostDecision = DecisionPending // the host decides; it could not be asked yet
		}
		t.ReconcileAt = s.reconcile.NextSweep(s.clock.Now())
		if obs.ciFailed || reviewsUnread {
			t.ReconcileAt = s.now() // read again at once what could not be read now
		}
		if ci := s.ciFor(t); ci != nil {
			sub.CIProvider = optional(ci.Name())
		}
		return taskEvent{
			typ:     EventTaskUpdated,
			actor:   p.Actor,
			summary: fmt.Sprintf("Task %s submitted for review: pull request #%d (%s)", t.Identifier, sub.PRNumber, sub.Action),
			after: func(tx Tx, t *Task) error {
				sub.AvailableActions = t.AvailableActions
				if onCommit != nil {
					return onCommit(tx, &sub)
				}
				return nil
			},
		}, nil
	})
	if err != nil {
		return Submission{}, err
	}
	return sub, nil
}

// newSubmissionTx is the transaction that accepts sub, the submission it
// has just created: it answers the reads of sub from memory, sparing the
// Store's single writer two queries per submit. sub is as created, and a
// submission with a fresh ID has no reviews until this transaction
// records some (the host's, of a pull request reused), after which its
// reviews are read from the Store again.
type newSubmissionTx struct {
	Tx
	sub      *Submission
	reviewed bool // a review of sub was recorded
}

func (t *newSubmissionTx) Submission(ctx context.Context, id string) (Submission, error) {
	if id == t.sub.SubmissionID {
		return *t.sub, nil
	}
	return t.Tx.Submission(ctx, id)
}

func (t *newSubmissionTx) Reviews(ctx context.Context, submissionID string) ([]Review, error) {
	if submissionID == t.sub.SubmissionID && !t.reviewed {
		return nil, nil
	}
	return t.Tx.Reviews(ctx, submissionID)
}

func (t *newSubmissionTx) CreateReview(ctx context.Context, r Review) error {
	if r.SubmissionID == t.sub.SubmissionID {
		t.reviewed = true
	}
	return t.Tx.CreateReview(ctx, r)
}

// firstReading reads the CI and review state of pr, just opened or
// reused for t: through the adapter's BatchReader when it has one (one
// reading of everything, whose Version the reconciler's next reading
// starts from), else with a call each. What cannot be read is marked
// failed, for the reconciler to read at once.
func (s *Service) firstReading(ctx context.Context, adapter ProviderAdapter, t Task, pr PullRequest) observation {
	if _, ok := adapter.(BatchReader); !ok {
		return s.observeHead(ctx, adapter, &t, pr)
	}
	t.PROwner, t.PRRepo, t.PRNumber, t.HeadSHA, t.Facts = pr.Owner, pr.Repo, &pr.Number, &pr.HeadSHA, Facts{}
	reads, err := s.readHost(ctx, adapter, []Task{t}, ReadNow)
	if err == nil {
		err = reads[0].err
	}
	if err != nil || reads[0].obs.pr.HeadSHA != pr.HeadSHA {
		if err != nil {
			s.log.WarnContext(ctx, "read the pull request just submitted; the reconciler reads it at once", "task", t.ID, "err", err)
		}
		return observation{pr: pr, ciFailed: true, reviewsFailed: true}
	}
	obs := reads[0].obs
	obs.pr.Created = pr.Created
	return obs
}

// optional returns a pointer to s, or nil when s is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// submissionEnvelope is the body of a submit response.
type submissionEnvelope struct {
	Data             *Submission `json:"data"`
	AvailableActions []Action    `json:"availableActions"`
}

func (s *Service) handleSubmit(w http.ResponseWriter, r *http.Request, p *Principal) error {
	taskID := r.PathValue("id")
	var params SubmitParams
	req := keyedRequest{route: submitRoute, resourceID: taskID, status: http.StatusAccepted, body: &params, check: params.validate,
		actions: s.actionsOrNil(taskID), lockTask: taskID}
	return s.serveIdempotent(w, r, p, req,
		func(ctx context.Context, key string, respond func(Tx, any) error) error {
			params.IdempotencyKey, params.Actor = key, p.Actor
			_, err := s.submitLocked(ctx, taskID, params, func(tx Tx, sub *Submission) error {
				return respond(tx, submissionEnvelope{sub, sub.AvailableActions})
			})
			return err
		})
}

// actionsOrNil returns a function that reads a task's available actions for
// a conflict's details, or none when the task cannot be read.
func (s *Service) actionsOrNil(taskID string) func(context.Context) []Action {
	return func(ctx context.Context) []Action {
		t, err := s.Task(ctx, taskID)
		if err != nil {
			return []Action{}
		}
		return t.AvailableActions
	}
}

// keyedLocks hands out one lock per key, kept only while in use.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	ch      chan struct{} // holds a token while locked
	holders int           // holders and waiters
}

// lock locks key and returns the function that unlocks it. It gives up
// when ctx ends first.
func (k *keyedLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = make(map[string]*keyedLock)
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.holders++
	k.mu.Unlock()
	done := func() {
		k.mu.Lock()
		if l.holders--; l.holders == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}
