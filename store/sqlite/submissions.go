package sqlite

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
	accepted                             int64
}

func scanSubmission(row scanner) (lifecycle.Submission, error) {
	r := new(submissionRow)
	s := &r.sub
	err := row.Scan(&s.SubmissionID, &s.TaskID, &r.status, &r.mode, &s.PRURL, &s.PRNumber, &r.head, &r.base, &r.headSHA, &r.action,
		&s.IdempotencyKey, &r.owner, &r.repo, &r.ci, &r.policy, &r.participants, &s.Summary, &s.Notes, &r.checks,
		&s.Draft, &s.Actor.ID, &r.role, &r.accepted)
	if err != nil {
		return *s, translate(err)
	}
	s.Status, s.Mode, s.Action = lifecycle.Status(r.status), lifecycle.SubmitMode(r.mode), lifecycle.SubmissionAction(r.action)
	s.CodeReviewPolicy, s.Actor.Role = lifecycle.CodeReviewPolicy(r.policy), lifecycle.Role(r.role)
	s.Head, s.Base, s.HeadSHA = nullString(&r.head), nullString(&r.base), nullString(&r.headSHA)
	s.Owner, s.Repo, s.CIProvider = nullString(&r.owner), nullString(&r.repo), nullString(&r.ci)
	s.AcceptedAt = fromMillis(r.accepted)
	if err := json.Unmarshal(r.participants, &s.ReviewRoute.Participants); err != nil {
		return *s, fmt.Errorf("sqlite: submission %s participants: %w", s.SubmissionID, err)
	}
	if err := json.Unmarshal(r.checks, &s.Checks); err != nil {
		return *s, fmt.Errorf("sqlite: submission %s checks: %w", s.SubmissionID, err)
	}
	return *s, nil
}

// Submission implements lifecycle.Tx.
func (x *txn) Submission(ctx context.Context, id string) (lifecycle.Submission, error) {
	return getSubmission(x.ctx, x.conn, id)
}

func getSubmission(ctx context.Context, q queryer, id string) (lifecycle.Submission, error) {
	sub, err := scanSubmission(q.QueryRowContext(ctx, "SELECT "+submissionColumns+" FROM submissions WHERE id = ?", id))
	if err != nil {
		return sub, fmt.Errorf("sqlite: submission %s: %w", id, err)
	}
	return sub, nil
}

// Submissions implements lifecycle.Store. They come in the order they
// were recorded.
func (s *Store) Submissions(ctx context.Context, taskID string) ([]lifecycle.Submission, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	subs, err := queryAll(ctx, s.r, scanSubmission, "SELECT "+submissionColumns+" FROM submissions WHERE task_id = ? ORDER BY pos", taskID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: submissions of %s: %w", taskID, err)
	}
	return subs, nil
}

// CreateSubmission implements lifecycle.Tx.
func (x *txn) CreateSubmission(ctx context.Context, s lifecycle.Submission) error {
	participants, err := json.Marshal(nonNil(s.ReviewRoute.Participants))
	if err != nil {
		return fmt.Errorf("sqlite: encode submission %s: %w", s.SubmissionID, err)
	}
	checks, err := json.Marshal(nonNil(s.Checks))
	if err != nil {
		return fmt.Errorf("sqlite: encode submission %s: %w", s.SubmissionID, err)
	}
	_, err = x.conn.ExecContext(x.ctx, "INSERT INTO submissions ("+submissionColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.SubmissionID, s.TaskID, string(s.Status), string(s.Mode), s.PRURL, s.PRNumber, s.Head, s.Base, s.HeadSHA, string(s.Action),
		s.IdempotencyKey, s.Owner, s.Repo, s.CIProvider, string(s.CodeReviewPolicy), string(participants), s.Summary, s.Notes, string(checks),
		s.Draft, s.Actor.ID, string(s.Actor.Role), millis(s.AcceptedAt.Time))
	if err != nil {
		return fmt.Errorf("sqlite: create submission %s: %w", s.SubmissionID, translate(err))
	}
	return nil
}

const reviewColumns = "id, task_id, submission_id, reviewer_id, reviewer_role, outcome, body, submitted_at, head_sha, host_id"

// Reviews implements lifecycle.Store.
func (s *Store) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	return listReviews(ctx, s.r, submissionID)
}

// Reviews implements lifecycle.Tx.
func (x *txn) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	return listReviews(x.ctx, x.conn, submissionID)
}

func listReviews(ctx context.Context, q queryer, submissionID string) ([]lifecycle.Review, error) {
	reviews, err := queryAll(ctx, q, scanReview, "SELECT "+reviewColumns+" FROM reviews WHERE submission_id = ? ORDER BY pos", submissionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: reviews of %s: %w", submissionID, err)
	}
	return reviews, nil
}

func scanReview(row scanner) (lifecycle.Review, error) {
	var (
		r             lifecycle.Review
		role, outcome string
		at            int64
	)
	if err := row.Scan(&r.ID, &r.TaskID, &r.SubmissionID, &r.Reviewer.ID, &role, &outcome, &r.Body, &at, &r.HeadSHA, &r.HostID); err != nil {
		return r, translate(err)
	}
	r.Reviewer.Role, r.Outcome, r.SubmittedAt = lifecycle.Role(role), lifecycle.ReviewOutcome(outcome), fromMillis(at)
	return r, nil
}

// CreateReview implements lifecycle.Tx.
func (x *txn) CreateReview(ctx context.Context, r lifecycle.Review) error {
	_, err := x.conn.ExecContext(x.ctx, "INSERT INTO reviews ("+reviewColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		r.ID, r.TaskID, r.SubmissionID, r.Reviewer.ID, string(r.Reviewer.Role), string(r.Outcome), r.Body, millis(r.SubmittedAt.Time), r.HeadSHA, r.HostID)
	if err != nil {
		return fmt.Errorf("sqlite: create review %s: %w", r.ID, translate(err))
	}
	return nil
}

// Checks implements lifecycle.Store.
func (s *Store) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	return listChecks(ctx, s.r, taskID, headSHA)
}

// Checks implements lifecycle.Tx.
func (x *txn) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	return listChecks(x.ctx, x.conn, taskID, headSHA)
}

func listChecks(ctx context.Context, q queryer, taskID, headSHA string) ([]lifecycle.Check, error) {
	scan := func(row scanner) (lifecycle.Check, error) {
		var (
			c              = lifecycle.Check{TaskID: taskID, HeadSHA: headSHA}
			source, status string
			url            sql.NullString
			at             int64
		)
		if err := row.Scan(&source, &c.Name, &status, &url, &at); err != nil {
			return c, translate(err)
		}
		c.Source, c.Status, c.URL, c.UpdatedAt = lifecycle.CheckSource(source), lifecycle.CheckStatus(status), nullString(&url), fromMillis(at)
		return c, nil
	}
	checks, err := queryAll(ctx, q, scan, `SELECT source, name, status, url, updated_at FROM checks
		WHERE task_id = ? AND head_sha = ? ORDER BY source, name`, taskID, headSHA)
	if err != nil {
		return nil, fmt.Errorf("sqlite: checks of %s at %s: %w", taskID, headSHA, err)
	}
	return checks, nil
}

// PutChecks implements lifecycle.Tx. With p.Replace it deletes the
// source's checks of the commit first, then inserts p.Checks.
func (x *txn) PutChecks(ctx context.Context, p lifecycle.PutChecksParams) error {
	if p.Replace {
		_, err := x.conn.ExecContext(x.ctx, "DELETE FROM checks WHERE task_id = ? AND head_sha = ? AND source = ?", p.TaskID, p.HeadSHA, string(p.Source))
		if err != nil {
			return fmt.Errorf("sqlite: replace checks of %s: %w", p.TaskID, translate(err))
		}
	}
	for _, c := range p.Checks {
		_, err := x.conn.ExecContext(x.ctx, `INSERT INTO checks (task_id, head_sha, source, name, status, url, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (task_id, head_sha, source, name) DO UPDATE SET status = excluded.status, url = excluded.url, updated_at = excluded.updated_at`,
			p.TaskID, p.HeadSHA, string(p.Source), c.Name, string(c.Status), c.URL, millis(c.UpdatedAt.Time))
		if err != nil {
			return fmt.Errorf("sqlite: put check %s of %s: %w", c.Name, p.TaskID, translate(err))
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
	err := s.r.QueryRowContext(ctx, "SELECT received_at FROM provider_deliveries WHERE source = ? AND id = ?", source, id).Scan(&at)
	if err != nil {
		return d, fmt.Errorf("sqlite: provider delivery %s: %w", id, translate(err))
	}
	d.ReceivedAt = time.UnixMilli(at)
	return d, nil
}

// RecordProviderDelivery implements lifecycle.Tx.
func (x *txn) RecordProviderDelivery(ctx context.Context, d lifecycle.ProviderDelivery) error {
	_, err := x.conn.ExecContext(x.ctx, "INSERT INTO provider_deliveries (source, id, received_at) VALUES (?, ?, ?)", d.Source, d.ID, millis(d.ReceivedAt))
	if err != nil {
		return fmt.Errorf("sqlite: record provider delivery %s: %w", d.ID, translate(err))
	}
	return nil
}

// deleteProviderDeliveriesBefore deletes the records received before t.
func (s *Store) deleteProviderDeliveriesBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM provider_deliveries WHERE (source, id) IN (SELECT source, id FROM provider_deliveries
		WHERE received_at < ? LIMIT ?)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("sqlite: delete provider deliveries: %w", err)
	}
	return n, nil
}
