package lifecycletype

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
	// Code is machine-readable. Right before merging, the runner reads the
	// pull request, its CI and its review decision from the host; when the
	// task is no longer shippable nothing is merged and the code says why:
	// head_moved (new commits since the ship was accepted), ci_not_passed,
	// review_not_approved, not_mergeable (it conflicts with its base, or
	// is behind a base the host requires it up to date with), draft, or
	// not_shippable (closed, or left review). Then: head_sha_mismatch (the
	// host refused to merge another head, or merged one), merge_failed
	// (the host refused or failed the merge; Message holds its reason) and
	// deploy_failed.
	Code string `json:"code"`
	// Message says what happened, in words.
	Message string `json:"message"`
}

// ShipWait says why a running ship operation waits, and until when.
type ShipWait struct {
	// Reason is machine-readable: rate_limited (the code host's or the
	// deployer's rate limit is spent; the operation resumes when it
	// resets), mergeability_unknown (the host is still working out
	// whether it can merge the pull request, as GitHub does for seconds
	// after each merge into the same base; the merge is tried again),
	// merge_train (the pull request is on the host's merge train, followed
	// until it merges or drops it), or the Reason of another
	// [TemporaryError] an adapter returned.
	Reason string `json:"reason"`
	// Message says it in words.
	Message string `json:"message"`
	// Until is when the operation goes on.
	Until Timestamp `json:"until"`
}

// WaitMergeabilityUnknown is the [TemporaryError.Reason] of an adapter
// whose host refused a merge while it was still working out whether it
// can merge the pull request: the ship runner waits and tries again,
// within Config.ShipRetryBudget, and shows the wait in
// [ShipOperation.Wait].
const WaitMergeabilityUnknown = "mergeability_unknown"

// WaitMergeTrain is the [TemporaryError.Reason] of an adapter whose pull
// request is on its host's merge train (GitLab's), whose pipeline tests it
// before the host merges it: the ship runner follows it, however long the
// train takes, outside Config.ShipRetryBudget, and shows the wait in
// [ShipOperation.Wait]. The train itself ends it: merged, or dropped with
// the host's reason.
const WaitMergeTrain = "merge_train"

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
	// Wait says why a running operation waits (a rate limit), or is nil.
	Wait *ShipWait `json:"wait"`

	// SubmissionMode and PullRequest say which adapter merges what.
	SubmissionMode SubmitMode     `json:"-"`
	PullRequest    PullRequestRef `json:"-"`
	// Actor asked for the ship; TraceID is its request's trace.
	Actor   Actor   `json:"-"`
	TraceID *string `json:"-"`
	// Attempts counts the times a runner took the operation up.
	Attempts int `json:"-"`
	// LeaseOwner names the process whose runner holds a running
	// operation; LeaseUntil is when the operation may be taken over if that
	// runner goes silent. The runner renews the lease while it works.
	LeaseOwner string    `json:"-"`
	LeaseUntil Timestamp `json:"-"`
}

// HeldBy reports whether the runner of owner still holds op, which it
// claimed for the attempt-th time: op is running, under its lease, and
// no other runner took it over since.
func (op ShipOperation) HeldBy(owner string, attempt int) bool {
	return op.Status == ShipRunning && op.LeaseOwner == owner && op.Attempts == attempt
}

// Valid reports whether m is one of the ship modes.
func (m ShipMode) Valid() bool { return m == ShipMergeOnly || m == ShipMergeAndDeploy }

// Valid reports whether e is one of the environments.
func (e Environment) Valid() bool { return e == EnvironmentStaging || e == EnvironmentProduction }
