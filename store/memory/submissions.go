package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/tasklifecycle/lifecycle"
)

// storedSubmission returns the copy of sub the Store keeps: without
// AvailableActions, with empty lists for nil ones.
func storedSubmission(sub lifecycle.Submission) lifecycle.Submission {
	sub = clone(sub)
	sub.AvailableActions = nil
	sub.ReviewRoute.Participants, sub.Checks = nonNil(sub.ReviewRoute.Participants), nonNil(sub.Checks)
	return sub
}

// Submission implements lifecycle.Tx.
func (x *txn) Submission(ctx context.Context, id string) (lifecycle.Submission, error) {
	return getSubmission(x.submissions, id)
}

// getSubmission returns a copy of the submission with the given ID.
func getSubmission(subs records[lifecycle.Submission], id string) (lifecycle.Submission, error) {
	sub, ok := subs.get(id)
	if !ok {
		return sub, fmt.Errorf("memory: submission %s: %w", id, lifecycle.ErrNotFound)
	}
	return clone(sub), nil
}

// Submissions implements lifecycle.Store. They come in the order they
// were recorded.
func (s *Store) Submissions(ctx context.Context, taskID string) ([]lifecycle.Submission, error) {
	var subs []lifecycle.Submission
	err := s.read(func(t *tables) error {
		for _, sub := range t.submissions.all() {
			if sub.TaskID == taskID {
				subs = append(subs, clone(sub))
			}
		}
		return nil
	})
	return subs, err
}

// CreateSubmission implements lifecycle.Tx.
func (x *txn) CreateSubmission(ctx context.Context, sub lifecycle.Submission) error {
	if _, ok := x.submissions.insert(sub.SubmissionID, storedSubmission(sub)); !ok {
		return fmt.Errorf("memory: create submission %s: %w", sub.SubmissionID, lifecycle.ErrConflict)
	}
	return nil
}

// Reviews implements lifecycle.Store.
func (s *Store) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	var reviews []lifecycle.Review
	err := s.read(func(t *tables) error {
		reviews = reviewsOf(t.reviews, submissionID)
		return nil
	})
	return reviews, err
}

// Reviews implements lifecycle.Tx.
func (x *txn) Reviews(ctx context.Context, submissionID string) ([]lifecycle.Review, error) {
	return reviewsOf(x.reviews, submissionID), nil
}

// reviewsOf returns copies of the reviews of a submission, in the order
// they were recorded.
func reviewsOf(all records[lifecycle.Review], submissionID string) []lifecycle.Review {
	var reviews []lifecycle.Review
	for _, r := range all.all() {
		if r.SubmissionID == submissionID {
			reviews = append(reviews, clone(r))
		}
	}
	return reviews
}

// CreateReview implements lifecycle.Tx.
func (x *txn) CreateReview(ctx context.Context, r lifecycle.Review) error {
	if _, ok := x.reviews.insert(r.ID, clone(r)); !ok {
		return fmt.Errorf("memory: create review %s: %w", r.ID, lifecycle.ErrConflict)
	}
	return nil
}

// Checks implements lifecycle.Store.
func (s *Store) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	var checks []lifecycle.Check
	err := s.read(func(t *tables) error {
		checks = checksOf(t.checks, taskID, headSHA)
		return nil
	})
	return checks, err
}

// Checks implements lifecycle.Tx.
func (x *txn) Checks(ctx context.Context, taskID, headSHA string) ([]lifecycle.Check, error) {
	return checksOf(x.checks, taskID, headSHA), nil
}

// checksOf returns copies of the checks of a task's commit, ordered by
// source and name.
func checksOf(all entries[checkKey, lifecycle.Check], taskID, headSHA string) []lifecycle.Check {
	var checks []lifecycle.Check
	for k, c := range all.all() {
		if k.taskID == taskID && k.headSHA == headSHA {
			checks = append(checks, clone(c))
		}
	}
	slices.SortFunc(checks, func(a, b lifecycle.Check) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Name, b.Name))
	})
	return checks
}

// PutChecks implements lifecycle.Tx. Each check is stored with p's
// task, commit and source, whatever its own say.
func (x *txn) PutChecks(ctx context.Context, p lifecycle.PutChecksParams) error {
	if p.Replace {
		var old []checkKey
		for k := range x.checks.all() {
			if k.taskID == p.TaskID && k.headSHA == p.HeadSHA && k.source == p.Source {
				old = append(old, k)
			}
		}
		for _, k := range old {
			x.checks.remove(k)
		}
	}
	for _, c := range p.Checks {
		c = clone(c)
		c.TaskID, c.HeadSHA, c.Source = p.TaskID, p.HeadSHA, p.Source
		c.Failure = nil // kept as a CIFailureRecord, not with the check
		x.checks.set(checkKey{c.TaskID, c.HeadSHA, c.Source, c.Name}, c)
	}
	return nil
}

// ProviderDelivery implements lifecycle.Store.
func (s *Store) ProviderDelivery(ctx context.Context, source, id string) (lifecycle.ProviderDelivery, error) {
	var d lifecycle.ProviderDelivery
	err := s.read(func(t *tables) error {
		var ok bool
		if d, ok = t.providerDeliveries[providerKey{source, id}]; !ok {
			return fmt.Errorf("memory: provider delivery %s: %w", id, lifecycle.ErrNotFound)
		}
		return nil
	})
	return d, err
}

// RecordProviderDelivery implements lifecycle.Tx.
func (x *txn) RecordProviderDelivery(ctx context.Context, d lifecycle.ProviderDelivery) error {
	k := providerKey{d.Source, d.ID}
	if _, ok := x.providerDeliveries.get(k); ok {
		return fmt.Errorf("memory: record provider delivery %s: %w", d.ID, lifecycle.ErrConflict)
	}
	x.providerDeliveries.set(k, d)
	return nil
}
