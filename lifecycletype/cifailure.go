package lifecycletype

import (
	"context"
	"time"
)

// CIFailure says why a CI check failed, as the CI system told it: served
// as the failure member of a failed check by GET /tasks/{id}/ci-status,
// and accepted with a failed check reported by POST /tasks/{id}/checks or
// a submission. Its members are GitHub's check run output (title,
// summary, text) and annotations, a commit status's description, or the
// end of a GitLab job's log.
type CIFailure struct {
	// Title is the failure's one-line heading (a check run's
	// output.title), or "".
	Title string `json:"title"`
	// Summary says in a few lines what failed (a check run's
	// output.summary, a commit status's description), or "".
	Summary string `json:"summary"`
	// Excerpt is the end of the check's log or details (a check run's
	// output.text, the last bytes of a GitLab job's trace, its ANSI
	// escapes and section markers stripped), or "".
	Excerpt string `json:"excerpt"`
	// Truncated says that Title, Summary, Excerpt or Annotations were cut
	// to the Service's bounds (lifecycle.Config.CIFailureExcerptBytes and
	// CIFailureTaskBytes), or that the log was longer than the excerpt.
	Truncated bool `json:"truncated"`
	// LogURL is where a person reads the whole log, or nil.
	LogURL *string `json:"logUrl"`
	// Annotations point at lines of the change (GitHub's check run
	// annotations). Never nil once stored.
	Annotations []CIAnnotation `json:"annotations"`
	// FetchedAt is when the details were learned.
	FetchedAt Timestamp `json:"fetchedAt"`
}

// CIAnnotation points a failure at lines of a file, as a GitHub check run
// annotation does.
type CIAnnotation struct {
	// Path is the file's path in the repository.
	Path string `json:"path"`
	// StartLine and EndLine are the first and last lines concerned.
	StartLine int `json:"startLine"`
	EndLine   int `json:"endLine"`
	// Level is notice, warning or failure.
	Level AnnotationLevel `json:"level"`
	// Message says what is wrong there.
	Message string `json:"message"`
}

// AnnotationLevel is how grave an annotation is, in GitHub's terms
// (annotation_level).
type AnnotationLevel string

// The annotation levels.
const (
	AnnotationNotice  AnnotationLevel = "notice"
	AnnotationWarning AnnotationLevel = "warning"
	AnnotationFailure AnnotationLevel = "failure"
)

// Valid reports whether l is one of the annotation levels.
func (l AnnotationLevel) Valid() bool {
	switch l {
	case AnnotationNotice, AnnotationWarning, AnnotationFailure:
		return true
	}
	return false
}

// CIFailureReader is implemented by a [CIProvider] (an adapter that is
// one) that can say why a failed check failed. The Service asks it once
// per failed check of a task's head commit, in the background after the
// failure is stored, and keeps the answer: reads of the CI status never
// call it.
//
// Errors: CIFailure returns an error matching ErrNotFound when the host
// has no details of the check (it was deleted, or the host keeps none);
// the Service then stores that there are none. Any other error is a
// failure of the host: the Service asks again later, with backoff, a few
// times.
type CIFailureReader interface {
	// CIFailure returns the details of the failed check q.Check of
	// q.HeadSHA. Its Excerpt need hold no more than q.MaxBytes bytes (its
	// end), and an adapter reads no more of a log than that; the Service
	// bounds every member again.
	CIFailure(ctx context.Context, q CIFailureQuery) (CIFailure, error)
}

// CIFailureQuery asks a [CIFailureReader] why a check failed.
type CIFailureQuery struct {
	// Task is the task whose pull request was checked.
	Task Task
	// PullRequest names the pull request.
	PullRequest PullRequestRef
	// HeadSHA is the commit the check ran on.
	HeadSHA string
	// Check is the failed check as the CI provider reported it: its name
	// and URL.
	Check CICheck
	// MaxBytes is the most bytes of excerpt the Service keeps.
	MaxBytes int
}

// CIFailureRecord is what a Store keeps of the failure of one check of a
// task's commit: its details once known, or a mark that they are still to
// be fetched from the CI provider (Due).
type CIFailureRecord struct {
	// TaskID, HeadSHA, Source and Name say which check failed.
	TaskID  string
	HeadSHA string
	Source  CheckSource
	Name    string
	// Due says the details are still to be fetched; NextAttemptAt is then
	// when they may be, and Attempts how many fetches were tried.
	Due           bool
	Attempts      int
	NextAttemptAt Timestamp
	// Failure is the details, or nil when there are none (or they are
	// still due).
	Failure *CIFailure
	// UpdatedAt is when the record last changed.
	UpdatedAt Timestamp
}

// CIFailureStore is implemented by a Store that keeps the details of
// failed CI checks ([CIFailureRecord]); its Update's Tx is then a
// [CIFailureTx]. Without it, CI status reads serve no failure details and
// none are fetched.
type CIFailureStore interface {
	// CIFailures returns the failure records of a task's commit, ordered
	// by source and name; an unknown task or commit has none.
	CIFailures(ctx context.Context, taskID, headSHA string) ([]CIFailureRecord, error)
}

// CIFailureTx is the Tx of a [CIFailureStore]: failures are marked due in
// the transaction that learns them, and their details stored in another.
type CIFailureTx interface {
	// CIFailures is [CIFailureStore.CIFailures] within the transaction.
	CIFailures(ctx context.Context, taskID, headSHA string) ([]CIFailureRecord, error)
	// PutCIFailure stores r, replacing the record of the same task,
	// commit, source and name, if any.
	PutCIFailure(ctx context.Context, r CIFailureRecord) error
	// ClaimCIFailures takes up to p.Limit due records whose NextAttemptAt
	// is not after p.Now, earliest first, sets their NextAttemptAt to
	// p.Until and returns them as stored: until then no other claim
	// returns them. The locking contract is the one of
	// [Tx.ClaimShipOperations].
	ClaimCIFailures(ctx context.Context, p ClaimCIFailuresParams) ([]CIFailureRecord, error)
}

// ClaimCIFailuresParams says which failure records a fetcher claims.
type ClaimCIFailuresParams struct {
	// Now is the time of the claim.
	Now time.Time
	// Until is the claimed records' new NextAttemptAt: the fetcher's
	// lease.
	Until time.Time
	// Limit is the most records to claim, at least 1.
	Limit int
}

// EventTaskCIFailed: the overall CI of a task's head commit became failed
// (see [TaskCIFailedData]); announced once per head commit.
const EventTaskCIFailed EventType = "task.ci_failed"

// TaskCIFailedData is the data of a task.ci_failed event.
type TaskCIFailedData struct {
	EventData
	// HeadSHA is the commit whose CI failed.
	HeadSHA string `json:"headSha"`
	// FailedChecks are its failed checks (at most 20).
	FailedChecks []FailedCheck `json:"failedChecks"`
}

// FailedCheck is a failed check as a task.ci_failed event shows it.
type FailedCheck struct {
	// Name names the check.
	Name string `json:"name"`
	// URL points to its details, or is nil.
	URL *string `json:"url"`
	// Source is provider, reported or self_reported.
	Source CheckSource `json:"source"`
	// Title and Summary are the failure's, when known as the failure is
	// announced (at most 200 and 500 bytes), or "". Details fetched from
	// the CI provider later are served by the CI status.
	Title   string `json:"title"`
	Summary string `json:"summary"`
}
