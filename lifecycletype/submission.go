package lifecycletype

// SubmitMode says how a submission reaches review.
type SubmitMode string

// The submit modes.
const (
	// ModeAdapterManaged: the live provider adapter of the task creates or
	// reuses a pull request. The default.
	ModeAdapterManaged SubmitMode = "adapter_managed"
	// ModeArtifact: the submission is recorded by the artifact adapter (local
	// git repositories), for demos without provider credentials.
	ModeArtifact SubmitMode = "artifact"
)

// SubmissionAction says what the adapter did with a submission.
type SubmissionAction string

// What the adapter did with a submission ([Submission.Action]); these
// are not task actions ([Action]).
const (
	// SubmissionCreated: the adapter opened a pull request.
	SubmissionCreated SubmissionAction = "created"
	// SubmissionExisting: the adapter reused the task's open pull request.
	SubmissionExisting SubmissionAction = "existing"
	// SubmissionAccepted: the artifact adapter recorded the work.
	SubmissionAccepted SubmissionAction = "accepted"
)

// Participant is an agent routed to review a submission.
type Participant struct {
	// ID is the agent's ID.
	ID string `json:"id"`
	// Role is the agent's part in the review, such as "reviewer".
	Role string `json:"role"`
}

// ReviewRoute is who reviews a submission.
type ReviewRoute struct {
	Participants []Participant `json:"participants"`
}

// Submission is an agent's submission of finished work, as served by POST
// /tasks/{id}/submit. Members tagged "-" are kept but not served.
type Submission struct {
	SubmissionID     string           `json:"submissionId"`
	TaskID           string           `json:"taskId"`
	Status           Status           `json:"status"`
	PRURL            string           `json:"prUrl"`
	PRNumber         int              `json:"prNumber"`
	Head             *string          `json:"head"`
	Base             *string          `json:"base"`
	HeadSHA          *string          `json:"headSha"`
	Action           SubmissionAction `json:"action"`
	IdempotencyKey   string           `json:"idempotencyKey"`
	Owner            *string          `json:"owner"`
	Repo             *string          `json:"repo"`
	CIProvider       *string          `json:"ciProvider"`
	CodeReviewPolicy CodeReviewPolicy `json:"codeReviewPolicy"`
	ReviewRoute      ReviewRoute      `json:"reviewRoute"`
	AcceptedAt       Timestamp        `json:"acceptedAt"`
	AvailableActions []Action         `json:"availableActions"`

	// Mode is how the submission was made.
	Mode SubmitMode `json:"-"`
	// Summary, Notes and Checks are what the agent submitted.
	Summary string           `json:"-"`
	Notes   string           `json:"-"`
	Checks  []SubmittedCheck `json:"-"`
	// Draft says whether the pull request was opened as a draft.
	Draft bool `json:"-"`
	// Actor submitted.
	Actor Actor `json:"-"`
}

// Review is a reviewer's verdict on a submission.
type Review struct {
	ID          string        `json:"id"`
	Reviewer    Actor         `json:"reviewer"`
	Outcome     ReviewOutcome `json:"outcome"`
	Body        string        `json:"body"`
	SubmittedAt Timestamp     `json:"submittedAt"`

	// TaskID and SubmissionID say what was reviewed.
	TaskID       string `json:"-"`
	SubmissionID string `json:"-"`
	// HeadSHA is the task's head commit when the review was made, or "".
	HeadSHA string `json:"-"`
	// HostID is the review's ID at the code host for a review learned from
	// the host, or "" for one posted to the Service.
	HostID string `json:"-"`
}

// CheckSource says where a check result came from.
type CheckSource string

// The check sources.
const (
	// SourceProvider: the CI provider (check runs, statuses, pipelines).
	SourceProvider CheckSource = "provider"
	// SourceReported: POST /tasks/{id}/checks.
	SourceReported CheckSource = "reported"
	// SourceSelfReported: the checks of the submission itself.
	SourceSelfReported CheckSource = "self_reported"
)

// Check is one CI check of a task's head commit.
type Check struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	URL    *string     `json:"url"`
	Source CheckSource `json:"source"`
	// Failure says why a failed check failed, when that is known (see
	// [CIFailure]), or is nil. The Service fills it in from the Store's
	// [CIFailureRecord]s as it reads; PutChecks does not keep it.
	Failure *CIFailure `json:"failure"`

	// TaskID and HeadSHA say what was checked.
	TaskID  string `json:"-"`
	HeadSHA string `json:"-"`
	// UpdatedAt is when the result was last reported.
	UpdatedAt Timestamp `json:"-"`
}
