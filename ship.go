package lifecycle

// ShipStatus is the state of a ship operation.
type ShipStatus string

// The ship operation statuses.
const (
	ShipQueued    ShipStatus = "queued"
	ShipRunning   ShipStatus = "running"
	ShipSucceeded ShipStatus = "succeeded"
	ShipFailed    ShipStatus = "failed"
)

// Environment is where a shipped task is deployed.
type Environment string

// The deployment environments.
const (
	EnvironmentStaging    Environment = "staging"
	EnvironmentProduction Environment = "production"
)

// ShipMode says whether a ship deploys after merging.
type ShipMode string

// The ship modes.
const (
	ShipMergeOnly      ShipMode = "merge_only"
	ShipMergeAndDeploy ShipMode = "merge_and_deploy"
)

// ShipError says why a ship operation failed.
type ShipError struct {
	// Code is machine-readable: head_sha_mismatch, merge_failed,
	// deploy_failed or not_shippable.
	Code string `json:"code"`
	// Message says what happened, in words.
	Message string `json:"message"`
}

// ShipOperation is an asynchronous, durable operation that merges a task's
// pull request at an expected head commit and optionally deploys it. Its
// JSON encoding is the one of GET /ship-operations/{operationId}; POST
// /tasks/{id}/ship answers with its first five members.
type ShipOperation struct {
	TaskID            string      `json:"taskId"`
	OperationID       string      `json:"operationId"`
	Status            ShipStatus  `json:"status"`
	QueuedAt          Timestamp   `json:"queuedAt"`
	AvailableActions  []Action    `json:"availableActions"`
	Mode              ShipMode    `json:"mode"`
	TargetEnvironment Environment `json:"targetEnvironment"`
	ExpectedHeadSHA   string      `json:"expectedHeadSha"`
	StartedAt         *Timestamp  `json:"startedAt"`
	FinishedAt        *Timestamp  `json:"finishedAt"`
	MergeCommitSHA    *string     `json:"mergeCommitSha"`
	Deployment        *Deployment `json:"deployment"`
	Error             *ShipError  `json:"error"`

	// SubmissionMode and PullRequest say which adapter merges what.
	SubmissionMode SubmitMode     `json:"-"`
	PullRequest    PullRequestRef `json:"-"`
	// Actor asked for the ship; TraceID is its request's trace.
	Actor   Actor   `json:"-"`
	TraceID *string `json:"-"`
	// Attempts counts the times a runner took the operation up.
	Attempts int `json:"-"`
	// LeaseUntil is when a running operation whose runner went silent may
	// be taken over.
	LeaseUntil Timestamp `json:"-"`
}
