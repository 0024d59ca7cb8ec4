package lifecycle

import (
	"context"
	"testing"
)

// readCountingTx counts the submission and review reads that reach it.
type readCountingTx struct {
	Tx
	submissions, reviews int
}

func (t *readCountingTx) Submission(context.Context, string) (Submission, error) {
	t.submissions++
	return Submission{SubmissionID: "sub_other"}, nil
}

func (t *readCountingTx) Reviews(context.Context, string) ([]Review, error) {
	t.reviews++
	return []Review{{ID: "rev_stored"}}, nil
}

func (t *readCountingTx) CreateReview(context.Context, Review) error { return nil }

// newSubmissionTx answers the new submission's reads from memory until a
// review of it is recorded, and passes every other read to the Store.
func TestNewSubmissionTx(t *testing.T) {
	ctx := context.Background()
	base := &readCountingTx{}
	sub := Submission{SubmissionID: "sub_new", CodeReviewPolicy: PolicyAlwaysRequire}
	tx := &newSubmissionTx{Tx: base, sub: &sub}
	if got, err := tx.Submission(ctx, "sub_new"); err != nil || got.CodeReviewPolicy != PolicyAlwaysRequire {
		t.Errorf("Submission(new) = %+v, %v", got, err)
	}
	if got, err := tx.Reviews(ctx, "sub_new"); err != nil || len(got) != 0 {
		t.Errorf("Reviews(new) before any review = %v, %v; want none", got, err)
	}
	if base.submissions != 0 || base.reviews != 0 {
		t.Errorf("the Store was read %d and %d times for the new submission, want 0", base.submissions, base.reviews)
	}
	tx.Submission(ctx, "sub_old")
	tx.Reviews(ctx, "sub_old")
	if base.submissions != 1 || base.reviews != 1 {
		t.Errorf("reads of another submission reached the Store %d and %d times, want 1 and 1", base.submissions, base.reviews)
	}
	if err := tx.CreateReview(ctx, Review{ID: "rev_host", SubmissionID: "sub_new"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tx.Reviews(ctx, "sub_new"); len(got) != 1 || base.reviews != 2 {
		t.Errorf("Reviews(new) after a review was recorded = %v (Store read %d times), want the Store's", got, base.reviews)
	}
}
