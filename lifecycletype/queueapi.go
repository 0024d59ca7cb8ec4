package lifecycletype

// MergeQueue is a merge queue as the API serves it (GET /merge-queues/{id}).
type MergeQueue struct {
	ID         string `json:"id"`
	Repository string `json:"repository"`
	Base       string `json:"base"`
	// BaseSHA is the base's commit as the queue last knew it.
	BaseSHA string `json:"baseSha"`
	Paused  bool   `json:"paused"`
	// PauseReason says who paused it and why, or is null.
	PauseReason *string `json:"pauseReason"`
	// Entries are in landing order.
	Entries []MergeQueueEntry `json:"entries"`
	// Candidates are the candidates built or under test.
	Candidates []MergeQueueCandidate `json:"candidates"`
	Stats      MergeQueueStats       `json:"stats"`
	UpdatedAt  Timestamp             `json:"updatedAt"`
}

// MergeQueueEntry is an entry of a queue.
type MergeQueueEntry struct {
	TaskID         string                `json:"taskId"`
	TaskIdentifier string                `json:"taskIdentifier"`
	OperationID    string                `json:"operationId"`
	Position       int                   `json:"position"`
	HeadSHA        string                `json:"headSha"`
	PullRequest    MergeQueuePullRequest `json:"pullRequest"`
	Priority       string                `json:"priority"`
	EnteredAt      Timestamp             `json:"enteredAt"`
	// State is waiting, testing (in a candidate of the landing chain),
	// bisecting (suspected with a failed batch, tested apart) or landing.
	State string `json:"state"`
	// CandidateID is the candidate it is in, or 0.
	CandidateID int `json:"candidateId"`
}

// MergeQueuePullRequest names a pull request.
type MergeQueuePullRequest struct {
	Owner  string `json:"owner"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
}

// MergeQueueCandidate is a candidate of a queue.
type MergeQueueCandidate struct {
	ID int `json:"id"`
	// Kind is chain (it lands when it passes and everything before it
	// has), leaf (new entries tested on the tip of the chain), alternative
	// (a round's batch without one part, tested beside it on the base; it
	// lands instead should the batch fail and it pass) or probe (a part of
	// a failed batch, tested on the base; it never lands).
	Kind      string `json:"kind"`
	Branch    string `json:"branch"`
	State     string `json:"state"`
	ParentSHA string `json:"parentSha"`
	SHA       string `json:"sha"`
	// TaskIDs are its own entries (a chain candidate is built on the
	// candidates before it, with theirs).
	TaskIDs []string `json:"taskIds"`
	// Checks are its CI's checks as last read.
	Checks []CICheck `json:"checks"`
	// FailedChecks name the checks of its failed run.
	FailedChecks []string `json:"failedChecks"`
}

// MergeQueueStats count what a queue did.
type MergeQueueStats struct {
	CIRuns        int     `json:"ciRuns"`
	Landed        int     `json:"landed"`
	Batches       int     `json:"batches"`
	FailedBatches int     `json:"failedBatches"`
	Bisections    int     `json:"bisections"`
	Reworked      int     `json:"reworked"`
	FlakyBatches  int     `json:"flakyBatches"`
	MaxBisection  int     `json:"maxBisection"`
	FailRate      float64 `json:"failRate"`
}

// TaskMergeQueueData is the data of a task.merge_queue event: a change
// of the task's entry in a merge queue.
type TaskMergeQueueData struct {
	EventData

	// Change says what happened: entered, testing, passed, failed,
	// landed, removed, reworked, paused or resumed.
	Change string `json:"change"`
	// Queue is the queue as it is after the change, from the task's
	// side.
	Queue MergeQueueEvent `json:"queue"`
}

// MergeQueueEvent describes a queue in a task.merge_queue event.
type MergeQueueEvent struct {
	ID         string `json:"id"`
	Repository string `json:"repository"`
	Base       string `json:"base"`
	// Position is the task's place in landing order (1 lands first), or
	// 0 when it left the queue.
	Position int  `json:"position"`
	Entries  int  `json:"entries"`
	Paused   bool `json:"paused"`
	// PauseReason says, while the queue is paused, who paused it and why,
	// or why it paused itself.
	PauseReason string `json:"pauseReason,omitempty"`
	// Candidate is the candidate the task is in, or nil.
	Candidate *MergeQueueCandidate `json:"candidate"`
	// Rework says why it was sent back, when it was.
	Rework *QueueRework `json:"rework,omitempty"`
	// LandedSHA is the commit it landed in, when it did.
	LandedSHA string `json:"landedSha,omitempty"`
}
