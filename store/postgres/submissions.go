package postgres

import (
	"context"
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
	sub                                lifecycle.Submission
	status, mode, action, policy, role string
	participants, checks               string
	prNumber, accepted                 int64
}

func scanSubmission(row scanner) (lifecycle.Submission, error) {
	r := new(submissionRow)
	s := &r.sub
	err := row.Scan(&s.SubmissionID, &s.TaskID, &r.status, &r.mode, &s.PRURL, &r.prNumber, &s.Head, &s.Base, &s.HeadSHA, &r.action,
		&s.IdempotencyKey, &s.Owner, &s.Repo, &s.CIProvider, &r.policy, &r.participants, &s.Summary, &s.Notes, &r.checks,
		&s.Draft, &s.Actor.ID, &r.role, &r.accepted)
	if err != nil {
		return *s, err
	}
	s.PRNumber = int(r.prNumber)
	s.Status, s.Mode, s.Action = lifecycle.Status(r.status), lifecycle.SubmitMode(r.mode), lifecycle.SubmissionAction(r.action)
	s.CodeReviewPolicy, s.Actor.Role = lifecycle.CodeReviewPolicy(r.policy), lifecycle.Role(r.role)
	s.AcceptedAt = fromMillis(r.accepted)
	if err := json.Unmarshal([]byte(r.participants), &s.ReviewRoute.Participants); err != nil {
		return *s, fmt.Errorf("submission %s participants: %w", s.SubmissionID, err)
	}
	if err := json.Unmarshal([]byte(r.checks), &s.Checks); err != nil {
		return *s, fmt.Errorf("submission %s checks: %w", s.SubmissionID, err)
	}
	return *s, nil
}

// Submission implements lifecycle.Tx.
func (x *txn) Submission(ctx context.Context, id string) (lifecycle.Submission, error) {
	sub, err := scanSubmission(x.tx.QueryRow(ctx, "SELECT "+submissionColumns+" FROM submissions WHERE id = $1", id))
	if err != nil {
		return sub, fmt.Errorf("postgres: submission %s: %w", id, x.fail(err))
	}
	return sub, nil
}

// Submissions implements lifecycle.Store. They come in the order they
// were recorded.
func (s *Store) Submissions(ctx context.Context, taskID string) ([]lifecycle.Submission, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	subs, err := queryAll(ctx, s.pool, scanSubmission, "SELECT "+submissionColumns+" FROM submissions WHERE task_id = $1 ORDER BY pos", taskID)
	if err != nil {
		return nil, fmt.Errorf("postgres: submissions of %s: %w", taskID, s.translate(err))
	}
	return subs, nil
}

// CreateSubmission implements lifecycle.Tx.
func (x *txn) CreateSubmission(ctx context.Context, s lifecycle.Submission) error {
	participants, err := json.Marshal(nonNil(s.ReviewRoute.Participants))
	if err != nil {
		return fmt.Errorf("postgres: encode submission %s: %w", s.SubmissionID, err)
	}
	checks, err := json.Marshal(nonNil(s.Checks))
	if err != nil {
		return fmt.Errorf("postgres: encode submission %s: %w", s.SubmissionID, err)
	}
	n, err := x.exec(ctx, "INSERT INTO submissions ("+submissionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
		ON CONFLICT DO NOTHING`,
		s.SubmissionID, s.TaskID, string(s.Status), string(s.Mode), s.PRURL, int64(s.PRNumber), s.Head, s.Base, s.HeadSHA, string(s.Action),
		s.IdempotencyKey, s.Owner, s.Repo, s.CIProvider, string(s.CodeReviewPolicy), string(participants), s.Summary, s.Notes, string(checks),
		s.Draft, s.Actor.ID, string(s.Actor.Role), millis(s.AcceptedAt.Time))
	if err != nil {
		return fmt.Errorf("postgres: create submission %s: %w", s.SubmissionID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create submission %s: one with this ID exists: %w", s.SubmissionID, lifecycle.ErrConflict)
	}
	return nil
}

const reviewColumns = "id, task_id, submission_id, reviewer_id, reviewer_role, outcome, body, submitted_at, head_sha, host_id"

func scanReview(row scanner) (lifecycle.Review, error) {
	var (
		r             lifecycle.Review
		role, outcome string
		at            int64
	)
	if err := row.Scan(&r.ID, &r.TaskID, &r.SubmissionID, &r.Reviewer.ID, &role, &outcome, &r.Body, &at, &r.HeadSHA, &r.HostID); err != nil {
		return r, err
	}
	r.Reviewer.Role, r.Outcome, r.SubmittedAt = lifecycle.Role(role), lifecycle.ReviewOutcome(outcome), fromMillis(at)
	return r, nil
}

const reviewsSQL = "SELECT " + reviewColumns + " FROM reviews WHERE submission_id = $1 ORDER BY pos"

// Reviews implements lifecycle.Store.
func (s *Store) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	reviews, err := queryAll(ctx, s.pool, scanReview, reviewsSQL, submissionID)
	if err != nil {
		return nil, fmt.Errorf("postgres: reviews of %s: %w", submissionID, s.translate(err))
	}
	return reviews, nil
}

// Reviews implements lifecycle.Tx.
func (x *txn) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	reviews, err := queryAll(ctx, x.tx, scanReview, reviewsSQL, submissionID)
	if err != nil {
		return nil, fmt.Errorf("postgres: reviews of %s: %w", submissionID, x.fail(err))
	}
	return reviews, nil
}

// CreateReview implements lifecycle.Tx.
func (x *txn) CreateReview(ctx context.Context, r lifecycle.Review) error {
	n, err := x.exec(ctx, "INSERT INTO reviews ("+reviewColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
		r.ID, r.TaskID, r.SubmissionID, r.Reviewer.ID, string(r.Reviewer.Role), string(r.Outcome), r.Body, millis(r.SubmittedAt.Time), r.HeadSHA, r.HostID)
	if err != nil {
		return fmt.Errorf("postgres: create review %s: %w", r.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create review %s: one with this ID exists: %w", r.ID, lifecycle.ErrConflict)
	}
	return nil
}

const checksSQL = `SELECT source, name, status, url, updated_at FROM checks
	WHERE task_id = $1 AND head_sha = $2 ORDER BY source COLLATE "C", name COLLATE "C"`

// checkScanner returns a scanner of the checks of a task's commit.
func checkScanner(taskID, headSHA string) func(row scanner) (lifecycle.Check, error) {
	return func(row scanner) (lifecycle.Check, error) {
		var (
			c              = lifecycle.Check{TaskID: taskID, HeadSHA: headSHA}
			source, status string
			at             int64
		)
		if err := row.Scan(&source, &c.Name, &status, &c.URL, &at); err != nil {
			return c, err
		}
		c.Source, c.Status, c.UpdatedAt = lifecycle.CheckSource(source), lifecycle.CheckStatus(status), fromMillis(at)
		return c, nil
	}
}

// Checks implements lifecycle.Store.
func (s *Store) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	checks, err := queryAll(ctx, s.pool, checkScanner(taskID, headSHA), checksSQL, taskID, headSHA)
	if err != nil {
		return nil, fmt.Errorf("postgres: checks of %s at %s: %w", taskID, headSHA, s.translate(err))
	}
	return checks, nil
}

// Checks implements lifecycle.Tx.
func (x *txn) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	checks, err := queryAll(ctx, x.tx, checkScanner(taskID, headSHA), checksSQL, taskID, headSHA)
	if err != nil {
		return nil, fmt.Errorf("postgres: checks of %s at %s: %w", taskID, headSHA, x.fail(err))
	}
	return checks, nil
}

// PutChecks implements lifecycle.Tx. With p.Replace it deletes the
// source's checks of the commit first, then inserts p.Checks.
func (x *txn) PutChecks(ctx context.Context, p lifecycle.PutChecksParams) error {
	if p.Replace {
		if _, err := x.exec(ctx, "DELETE FROM checks WHERE task_id = $1 AND head_sha = $2 AND source = $3", p.TaskID, p.HeadSHA, string(p.Source)); err != nil {
			return fmt.Errorf("postgres: replace checks of %s: %w", p.TaskID, err)
		}
	}
	for _, c := range p.Checks {
		_, err := x.exec(ctx, `INSERT INTO checks (task_id, head_sha, source, name, status, url, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (task_id, head_sha, source, name) DO UPDATE SET status = excluded.status, url = excluded.url, updated_at = excluded.updated_at`,
			p.TaskID, p.HeadSHA, string(p.Source), c.Name, string(c.Status), c.URL, millis(c.UpdatedAt.Time))
		if err != nil {
			return fmt.Errorf("postgres: put check %s of %s: %w", c.Name, p.TaskID, err)
		}
	}
	return nil
}

// ProviderDelivery implements lifecycle.Store.
func (s *Store) ProviderDelivery(ctx context.Context, source, id string) (lifecycle.ProviderDelivery, error) {
	if s.closed.Load() {
		return lifecycle.ProviderDelivery{}, errClosed
	}
	d := lifecycle.ProviderDelivery{Source: source, ID: id}
	var at int64
	err := s.pool.QueryRow(ctx, "SELECT received_at FROM provider_deliveries WHERE source = $1 AND id = $2", source, id).Scan(&at)
	if err != nil {
		return d, fmt.Errorf("postgres: provider delivery %s: %w", id, s.translate(err))
	}
	d.ReceivedAt = time.UnixMilli(at)
	return d, nil
}

// RecordProviderDelivery implements lifecycle.Tx.
func (x *txn) RecordProviderDelivery(ctx context.Context, d lifecycle.ProviderDelivery) error {
	n, err := x.exec(ctx, "INSERT INTO provider_deliveries (source, id, received_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
		d.Source, d.ID, millis(d.ReceivedAt))
	if err != nil {
		return fmt.Errorf("postgres: record provider delivery %s: %w", d.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: record provider delivery %s of %s: recorded already: %w", d.ID, d.Source, lifecycle.ErrConflict)
	}
	return nil
}

// deleteProviderDeliveriesBefore deletes the records received before t.
func (s *Store) deleteProviderDeliveriesBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM provider_deliveries WHERE (source, id) IN (SELECT source, id FROM provider_deliveries
		WHERE received_at < $1 LIMIT $2)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("postgres: delete provider deliveries: %w", err)
	}
	return n, nil
}
