package memory

import (
	"cmp"
	"context"
	"slices"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// storedCIFailure returns the copy of r the Store keeps: Failure copied,
// not shared with the caller, and the times in UTC to the millisecond, as
// the SQL Stores keep them.
func storedCIFailure(r lifecycletype.CIFailureRecord) lifecycletype.CIFailureRecord {
	r = clone(r)
	r.NextAttemptAt = lifecycletype.NewTimestamp(r.NextAttemptAt.Time)
	r.UpdatedAt = lifecycletype.NewTimestamp(r.UpdatedAt.Time)
	if f := r.Failure; f != nil {
		f.FetchedAt = lifecycletype.NewTimestamp(f.FetchedAt.Time)
		if f.Annotations == nil {
			f.Annotations = []lifecycletype.CIAnnotation{}
		}
	}
	return r
}

// CIFailures implements lifecycletype.CIFailureStore.
func (s *Store) CIFailures(ctx context.Context, taskID, headSHA string) ([]lifecycletype.CIFailureRecord, error) {
	var rs []lifecycletype.CIFailureRecord
	err := s.read(func(t *tables) error {
		rs = ciFailuresOf(t.ciFailures, taskID, headSHA)
		return nil
	})
	return rs, err
}

// CIFailures implements lifecycletype.CIFailureTx.
func (x *txn) CIFailures(ctx context.Context, taskID, headSHA string) ([]lifecycletype.CIFailureRecord, error) {
	return ciFailuresOf(x.ciFailures, taskID, headSHA), nil
}

// ciFailuresOf returns copies of the failure records of a task's commit,
// ordered by source and name.
func ciFailuresOf(all entries[checkKey, lifecycletype.CIFailureRecord], taskID, headSHA string) []lifecycletype.CIFailureRecord {
	var rs []lifecycletype.CIFailureRecord
	for k, r := range all.all() {
		if k.taskID == taskID && k.headSHA == headSHA {
			rs = append(rs, clone(r))
		}
	}
	slices.SortFunc(rs, compareCIFailures)
	return rs
}

// compareCIFailures orders failure records by source and name.
func compareCIFailures(a, b lifecycletype.CIFailureRecord) int {
	return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Name, b.Name))
}

// PutCIFailure implements lifecycletype.CIFailureTx.
func (x *txn) PutCIFailure(ctx context.Context, r lifecycletype.CIFailureRecord) error {
	x.ciFailures.set(checkKey{r.TaskID, r.HeadSHA, r.Source, r.Name}, storedCIFailure(r))
	return nil
}

// ClaimCIFailures implements lifecycletype.CIFailureTx. The transaction
// runs alone, so each record goes to one claim.
func (x *txn) ClaimCIFailures(ctx context.Context, p lifecycletype.ClaimCIFailuresParams) ([]lifecycletype.CIFailureRecord, error) {
	var due []lifecycletype.CIFailureRecord
	for _, r := range x.ciFailures.all() {
		if r.Due && !r.NextAttemptAt.After(p.Now) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b lifecycletype.CIFailureRecord) int {
		return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt.Time), cmp.Compare(a.TaskID, b.TaskID),
			cmp.Compare(a.HeadSHA, b.HeadSHA), compareCIFailures(a, b))
	})
	if len(due) > p.Limit {
		due = due[:p.Limit]
	}
	out := make([]lifecycletype.CIFailureRecord, 0, len(due))
	for _, r := range due {
		r.NextAttemptAt = lifecycletype.NewTimestamp(p.Until)
		r = storedCIFailure(r)
		x.ciFailures.set(checkKey{r.TaskID, r.HeadSHA, r.Source, r.Name}, r)
		out = append(out, clone(r))
	}
	return out, nil
}
