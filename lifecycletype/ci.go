package lifecycletype

// CIOverall is the combined state of a commit's CI checks.
type CIOverall string

// The overall CI states.
const (
	CIPassed  CIOverall = "passed"
	CIFailed  CIOverall = "failed"
	CIRunning CIOverall = "running"
	CIPending CIOverall = "pending"
	CINone    CIOverall = "none"
)

// CIStatus is the CI state of a task's head commit, as served by GET
// /tasks/{id}/ci-status.
type CIStatus struct {
	Overall  CIOverall `json:"overall"`
	HeadSHA  *string   `json:"headSha"`
	Provider *string   `json:"provider"`
	Checks   []Check   `json:"checks"`
	// CheckedAt is when the CI provider was last asked about the head
	// commit, or nil when it has not been (or the task has none).
	CheckedAt *Timestamp `json:"checkedAt"`
	// Stale are the checks the CI provider lists as expected that have
	// not started for longer than it waits for them (see
	// [CIReport.Stale]): they are not waited on. Never nil.
	Stale []StaleCheck `json:"stale"`
}
