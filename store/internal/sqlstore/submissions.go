package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const submissionColumns = `id, task_id, status, mode, pr_url, pr_number, head, base, head_sha, action,
	idempotency_key, owner, repo, ci_provider, code_review_policy, participants, summary, notes, checks,
	draft, actor_id, actor_role, accepted_at`

// submissionRow holds the scanned columns of a submission.
type submissionRow struct {
	sub                                  lifecycle.Submission
	status, mode, action, policy, role   string
	head, base, headSHA, owner, repo, ci sql.NullString
	participants, checks                 []byte
	prNumber, accepted                   int64
}

func scanSubmission(row Row) (lifecycle.Submission, error) {
	r := new(submissionRow)
	s := &r.sub
	err := row.Scan(&s.SubmissionID, &s.TaskID, &r.status, &r.mode, &s.PRURL, &r.prNumber, &r.head, &r.base, &r.headSHA, &r.action,
		&s.IdempotencyKey, &r.owner, &r.repo, &r.ci, &r.policy, &r.participants, &s.Summary, &s.Notes, &r.checks,
		&s.Draft, &s.Actor.ID, &r.role, &r.accepted)
	if err != nil {
		return *s, err
	}
	s.PRNumber = int(r.prNumber)
	s.Status, s.Mode, s.Action = lifecycle.Status(r.status), lifecycle.SubmitMode(r.mode), lifecycle.SubmissionAction(r.action)
	s.CodeReviewPolicy, s.Actor.Role = lifecycle.CodeReviewPolicy(r.policy), lifecycle.Role(r.role)
	s.Head, s.Base, s.HeadSHA = NullString(&r.head), NullString(&r.base), NullString(&r.headSHA)
	s.Owner, s.Repo, s.CIProvider = NullString(&r.owner), NullString(&r.repo), NullString(&r.ci)
	s.AcceptedAt = FromMillis(r.accepted)
	if err := json.Unmarshal(r.participants, &s.ReviewRoute.Participants); err != nil {
		return *s, fmt.Errorf("submission %s participants: %w", s.SubmissionID, err)
	}
	if err := json.Unmarshal(r.checks, &s.Checks); err != nil {
		return *s, fmt.Errorf("submission %s checks: %w", s.SubmissionID, err)
	}
	return *s, nil
}

// Submission implements lifecycle.Tx.
func (x *Tx) Submission(ctx context.Context, id string) (lifecycle.Submission, error) {
	sub, err := scanSubmission(x.X.QueryRow(ctx, "SELECT "+submissionColumns+" FROM submissions WHERE id = $1", id))
	if err != nil {
		return sub, x.F.errorf("submission %s: %w", id, err)
	}
	return sub, nil
}

// Submissions implements lifecycle.Store. They come in the order they
// were recorded.
func (s *Reads) Submissions(ctx context.Context, taskID string) ([]lifecycle.Submission, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	subs, err := QueryAll(ctx, s.X, scanSubmission, "SELECT "+submissionColumns+" FROM submissions WHERE task_id = $1 ORDER BY pos", taskID)
	if err != nil {
		return nil, s.F.errorf("submissions of %s: %w", taskID, err)
	}
	return subs, nil
}

// CreateSubmission implements lifecycle.Tx.
func (x *Tx) CreateSubmission(ctx context.Context, s lifecycle.Submission) error {
	participants, err := json.Marshal(NonNil(s.ReviewRoute.Participants))
	if err != nil {
		return x.F.errorf("encode submission %s: %w", s.SubmissionID, err)
	}
	checks, err := json.Marshal(NonNil(s.Checks))
	if err != nil {
		return x.F.errorf("encode submission %s: %w", s.SubmissionID, err)
	}
	n, err := x.X.Exec(ctx, "INSERT INTO submissions ("+submissionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
		ON CONFLICT DO NOTHING`,
		s.SubmissionID, s.TaskID, string(s.Status), string(s.Mode), s.PRURL, int64(s.PRNumber), s.Head, s.Base, s.HeadSHA, string(s.Action),
		s.IdempotencyKey, s.Owner, s.Repo, s.CIProvider, string(s.CodeReviewPolicy), string(participants), s.Summary, s.Notes, string(checks),
		s.Draft, s.Actor.ID, string(s.Actor.Role), Millis(s.AcceptedAt.Time))
	if err != nil {
		return x.F.errorf("create submission %s: %w", s.SubmissionID, err)
	}
	if n == 0 {
		return x.F.errorf("create submission %s: one with this ID exists: %w", s.SubmissionID, lifecycle.ErrConflict)
	}
	return nil
}

const reviewsSQL = "SELECT id, task_id, submission_id, reviewer_id, reviewer_role, outcome, body, submitted_at, head_sha, host_id FROM reviews WHERE submission_id = $1 ORDER BY pos"

func scanReview(row Row) (lifecycle.Review, error) {
	var (
		r             lifecycle.Review
		role, outcome string
		at            int64
	)
	if err := row.Scan(&r.ID, &r.TaskID, &r.SubmissionID, &r.Reviewer.ID, &role, &outcome, &r.Body, &at, &r.HeadSHA, &r.HostID); err != nil {
		return r, err
	}
	r.Reviewer.Role, r.Outcome, r.SubmittedAt = lifecycle.Role(role), lifecycle.ReviewOutcome(outcome), FromMillis(at)
	return r, nil
}

// Reviews implements lifecycle.Store.
func (s *Reads) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	return reviews(ctx, s.F, s.X, submissionID)
}

// Reviews implements lifecycle.Tx.
func (x *Tx) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	return reviews(ctx, x.F, x.X, submissionID)
}

func reviews(ctx context.Context, f *Flavour, x Executor, submissionID string) ([]lifecycle.Review, error) {
	reviews, err := QueryAll(ctx, x, scanReview, reviewsSQL, submissionID)
	if err != nil {
		return nil, f.errorf("reviews of %s: %w", submissionID, err)
	}
	return reviews, nil
}

// CreateReview implements lifecycle.Tx.
func (x *Tx) CreateReview(ctx context.Context, r lifecycle.Review) error {
	n, err := x.X.Exec(ctx, `INSERT INTO reviews (id, task_id, submission_id, reviewer_id, reviewer_role, outcome, body, submitted_at, head_sha, host_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		r.ID, r.TaskID, r.SubmissionID, r.Reviewer.ID, string(r.Reviewer.Role), string(r.Outcome), r.Body, Millis(r.SubmittedAt.Time), r.HeadSHA, r.HostID)
	if err != nil {
		return x.F.errorf("create review %s: %w", r.ID, err)
	}
	if n == 0 {
		return x.F.errorf("create review %s: one with this ID exists: %w", r.ID, lifecycle.ErrConflict)
	}
	return nil
}

// Checks implements lifecycle.Store.
func (s *Reads) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	return checks(ctx, s.F, s.X, taskID, headSHA)
}

// Checks implements lifecycle.Tx.
func (x *Tx) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	return checks(ctx, x.F, x.X, taskID, headSHA)
}

// checks returns the checks of a task's commit, by source and name in
// byte order.
func checks(ctx context.Context, f *Flavour, x Executor, taskID, headSHA string) ([]lifecycle.Check, error) {
	scan := func(row Row) (lifecycle.Check, error) {
		var (
			c              = lifecycle.Check{TaskID: taskID, HeadSHA: headSHA}
			source, status string
			url            sql.NullString
			at             int64
		)
		if err := row.Scan(&source, &c.Name, &status, &url, &at); err != nil {
			return c, err
		}
		c.Source, c.Status, c.URL, c.UpdatedAt = lifecycle.CheckSource(source), lifecycle.CheckStatus(status), NullString(&url), FromMillis(at)
		return c, nil
	}
	checks, err := QueryAll(ctx, x, scan, `SELECT source, name, status, url, updated_at FROM checks
		WHERE task_id = $1 AND head_sha = $2 ORDER BY source`+f.Collate+`, name`+f.Collate, taskID, headSHA)
	if err != nil {
		return nil, f.errorf("checks of %s at %s: %w", taskID, headSHA, err)
	}
	return checks, nil
}

// PutChecks implements lifecycle.Tx. With p.Replace it deletes the
// source's checks of the commit first, then inserts p.Checks.
func (x *Tx) PutChecks(ctx context.Context, p lifecycle.PutChecksParams) error {
	if p.Replace {
		if _, err := x.X.Exec(ctx, "DELETE FROM checks WHERE task_id = $1 AND head_sha = $2 AND source = $3", p.TaskID, p.HeadSHA, string(p.Source)); err != nil {
			return x.F.errorf("replace checks of %s: %w", p.TaskID, err)
		}
	}
	for _, c := range p.Checks {
		_, err := x.X.Exec(ctx, `INSERT INTO checks (task_id, head_sha, source, name, status, url, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (task_id, head_sha, source, name) DO UPDATE SET status = excluded.status, url = excluded.url, updated_at = excluded.updated_at`,
			p.TaskID, p.HeadSHA, string(p.Source), c.Name, string(c.Status), c.URL, Millis(c.UpdatedAt.Time))
		if err != nil {
			return x.F.errorf("put check %s of %s: %w", c.Name, p.TaskID, err)
		}
	}
	return nil
}

// ProviderDelivery implements lifecycle.Store.
func (s *Reads) ProviderDelivery(ctx context.Context, source, id string) (lifecycle.ProviderDelivery, error) {
	if err := s.Open(); err != nil {
		return lifecycle.ProviderDelivery{}, err
	}
	d := lifecycle.ProviderDelivery{Source: source, ID: id}
	var at int64
	err := s.X.QueryRow(ctx, "SELECT received_at FROM provider_deliveries WHERE source = $1 AND id = $2", source, id).Scan(&at)
	if err != nil {
		return d, s.F.errorf("provider delivery %s: %w", id, err)
	}
	d.ReceivedAt = time.UnixMilli(at)
	return d, nil
}

// RecordProviderDelivery implements lifecycle.Tx.
func (x *Tx) RecordProviderDelivery(ctx context.Context, d lifecycle.ProviderDelivery) error {
	n, err := x.X.Exec(ctx, "INSERT INTO provider_deliveries (source, id, received_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
		d.Source, d.ID, Millis(d.ReceivedAt))
	if err != nil {
		return x.F.errorf("record provider delivery %s: %w", d.ID, err)
	}
	if n == 0 {
		return x.F.errorf("record provider delivery %s of %s: recorded already: %w", d.ID, d.Source, lifecycle.ErrConflict)
	}
	return nil
}
