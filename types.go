package lifecycle

import (
	"time"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// The types of the lifecycle's records and contracts, defined in
// package lifecycletype so that the Service's subsystems share them.
type (
	// ProviderAdapter is [lifecycletype.ProviderAdapter].
	ProviderAdapter = lifecycletype.ProviderAdapter
	// ReviewDecider is [lifecycletype.ReviewDecider].
	ReviewDecider = lifecycletype.ReviewDecider
	// BatchReader is [lifecycletype.BatchReader].
	BatchReader = lifecycletype.BatchReader
	// ReadPurpose is [lifecycletype.ReadPurpose].
	ReadPurpose = lifecycletype.ReadPurpose
	// BatchQuery is [lifecycletype.BatchQuery].
	BatchQuery = lifecycletype.BatchQuery
	// ReadRequest is [lifecycletype.ReadRequest].
	ReadRequest = lifecycletype.ReadRequest
	// Reading is [lifecycletype.Reading].
	Reading = lifecycletype.Reading
	// ReviewQuery is [lifecycletype.ReviewQuery].
	ReviewQuery = lifecycletype.ReviewQuery
	// HostReviews is [lifecycletype.HostReviews].
	HostReviews = lifecycletype.HostReviews
	// HostReview is [lifecycletype.HostReview].
	HostReview = lifecycletype.HostReview
	// PullRequestRef is [lifecycletype.PullRequestRef].
	PullRequestRef = lifecycletype.PullRequestRef
	// PullRequestRequest is [lifecycletype.PullRequestRequest].
	PullRequestRequest = lifecycletype.PullRequestRequest
	// PullRequestState is [lifecycletype.PullRequestState].
	PullRequestState = lifecycletype.PullRequestState
	// PullRequest is [lifecycletype.PullRequest].
	PullRequest = lifecycletype.PullRequest
	// Mergeability is [lifecycletype.Mergeability].
	Mergeability = lifecycletype.Mergeability
	// MergeRequest is [lifecycletype.MergeRequest].
	MergeRequest = lifecycletype.MergeRequest
	// MergeResult is [lifecycletype.MergeResult].
	MergeResult = lifecycletype.MergeResult
	// RepoRef is [lifecycletype.RepoRef].
	RepoRef = lifecycletype.RepoRef
	// QueueHost is [lifecycletype.QueueHost].
	QueueHost = lifecycletype.QueueHost
	// CandidateRequest is [lifecycletype.CandidateRequest].
	CandidateRequest = lifecycletype.CandidateRequest
	// CandidateHead is [lifecycletype.CandidateHead].
	CandidateHead = lifecycletype.CandidateHead
	// CandidateConflictError is [lifecycletype.CandidateConflictError].
	CandidateConflictError = lifecycletype.CandidateConflictError
	// AdvanceRequest is [lifecycletype.AdvanceRequest].
	AdvanceRequest = lifecycletype.AdvanceRequest
	// SubmittedCheck is [lifecycletype.SubmittedCheck].
	SubmittedCheck = lifecycletype.SubmittedCheck
	// CheckStatus is [lifecycletype.CheckStatus].
	CheckStatus = lifecycletype.CheckStatus
	// CIProvider is [lifecycletype.CIProvider].
	CIProvider = lifecycletype.CIProvider
	// CIQuery is [lifecycletype.CIQuery].
	CIQuery = lifecycletype.CIQuery
	// CIReport is [lifecycletype.CIReport].
	CIReport = lifecycletype.CIReport
	// StaleCheck is [lifecycletype.StaleCheck].
	StaleCheck = lifecycletype.StaleCheck
	// CICheck is [lifecycletype.CICheck].
	CICheck = lifecycletype.CICheck
	// Deployer is [lifecycletype.Deployer].
	Deployer = lifecycletype.Deployer
	// DeployRequest is [lifecycletype.DeployRequest].
	DeployRequest = lifecycletype.DeployRequest
	// Deployment is [lifecycletype.Deployment].
	Deployment = lifecycletype.Deployment
	// Scope is [lifecycletype.Scope].
	Scope = lifecycletype.Scope
	// APIKey is [lifecycletype.APIKey].
	APIKey = lifecycletype.APIKey
	// CIOverall is [lifecycletype.CIOverall].
	CIOverall = lifecycletype.CIOverall
	// CIStatus is [lifecycletype.CIStatus].
	CIStatus = lifecycletype.CIStatus
	// ProviderError is [lifecycletype.ProviderError].
	ProviderError = lifecycletype.ProviderError
	// RateLimitError is [lifecycletype.RateLimitError].
	RateLimitError = lifecycletype.RateLimitError
	// EventType is [lifecycletype.EventType].
	EventType = lifecycletype.EventType
	// Event is [lifecycletype.Event].
	Event = lifecycletype.Event
	// EventLinks is [lifecycletype.EventLinks].
	EventLinks = lifecycletype.EventLinks
	// Actor is [lifecycletype.Actor].
	Actor = lifecycletype.Actor
	// Role is [lifecycletype.Role].
	Role = lifecycletype.Role
	// EventData is [lifecycletype.EventData].
	EventData = lifecycletype.EventData
	// TaskUpdatedData is [lifecycletype.TaskUpdatedData].
	TaskUpdatedData = lifecycletype.TaskUpdatedData
	// TaskReviewedData is [lifecycletype.TaskReviewedData].
	TaskReviewedData = lifecycletype.TaskReviewedData
	// TaskShippedData is [lifecycletype.TaskShippedData].
	TaskShippedData = lifecycletype.TaskShippedData
	// TaskAwaitingUserData is [lifecycletype.TaskAwaitingUserData].
	TaskAwaitingUserData = lifecycletype.TaskAwaitingUserData
	// EventBlocker is [lifecycletype.EventBlocker].
	EventBlocker = lifecycletype.EventBlocker
	// EventFilter is [lifecycletype.EventFilter].
	EventFilter = lifecycletype.EventFilter
	// Facts is [lifecycletype.Facts].
	Facts = lifecycletype.Facts
	// MergeRefusal is [lifecycletype.MergeRefusal].
	MergeRefusal = lifecycletype.MergeRefusal
	// TemporaryError is [lifecycletype.TemporaryError].
	TemporaryError = lifecycletype.TemporaryError
	// ProviderEventKind is [lifecycletype.ProviderEventKind].
	ProviderEventKind = lifecycletype.ProviderEventKind
	// ProviderEvent is [lifecycletype.ProviderEvent].
	ProviderEvent = lifecycletype.ProviderEvent
	// DeploymentStatus is [lifecycletype.DeploymentStatus].
	DeploymentStatus = lifecycletype.DeploymentStatus
	// DeploymentObserver is [lifecycletype.DeploymentObserver].
	DeploymentObserver = lifecycletype.DeploymentObserver
	// ProviderEventSink is [lifecycletype.ProviderEventSink].
	ProviderEventSink = lifecycletype.ProviderEventSink
	// WebhookIntake is [lifecycletype.WebhookIntake].
	WebhookIntake = lifecycletype.WebhookIntake
	// ProviderDelivery is [lifecycletype.ProviderDelivery].
	ProviderDelivery = lifecycletype.ProviderDelivery
	// RefusedError is [lifecycletype.RefusedError].
	RefusedError = lifecycletype.RefusedError
	// ReviewOutcome is [lifecycletype.ReviewOutcome].
	ReviewOutcome = lifecycletype.ReviewOutcome
	// ReviewDecision is [lifecycletype.ReviewDecision].
	ReviewDecision = lifecycletype.ReviewDecision
	// CodeReviewPolicy is [lifecycletype.CodeReviewPolicy].
	CodeReviewPolicy = lifecycletype.CodeReviewPolicy
	// ShipStatus is [lifecycletype.ShipStatus].
	ShipStatus = lifecycletype.ShipStatus
	// Environment is [lifecycletype.Environment].
	Environment = lifecycletype.Environment
	// ShipMode is [lifecycletype.ShipMode].
	ShipMode = lifecycletype.ShipMode
	// ShipError is [lifecycletype.ShipError].
	ShipError = lifecycletype.ShipError
	// ShipWait is [lifecycletype.ShipWait].
	ShipWait = lifecycletype.ShipWait
	// ShipOperation is [lifecycletype.ShipOperation].
	ShipOperation = lifecycletype.ShipOperation
	// Store is [lifecycletype.Store].
	Store = lifecycletype.Store
	// Reader is [lifecycletype.Reader].
	Reader = lifecycletype.Reader
	// Tx is [lifecycletype.Tx].
	Tx = lifecycletype.Tx
	// ConsoleSessionStore is [lifecycletype.ConsoleSessionStore].
	ConsoleSessionStore = lifecycletype.ConsoleSessionStore
	// MergeQueueRecord is [lifecycletype.MergeQueueRecord].
	MergeQueueRecord = lifecycletype.MergeQueueRecord
	// MergeQueueStore is [lifecycletype.MergeQueueStore].
	MergeQueueStore = lifecycletype.MergeQueueStore
	// MergeQueueTx is [lifecycletype.MergeQueueTx].
	MergeQueueTx = lifecycletype.MergeQueueTx
	// CIFailure is [lifecycletype.CIFailure].
	CIFailure = lifecycletype.CIFailure
	// CIAnnotation is [lifecycletype.CIAnnotation].
	CIAnnotation = lifecycletype.CIAnnotation
	// AnnotationLevel is [lifecycletype.AnnotationLevel].
	AnnotationLevel = lifecycletype.AnnotationLevel
	// CIFailureReader is [lifecycletype.CIFailureReader].
	CIFailureReader = lifecycletype.CIFailureReader
	// CIFailureQuery is [lifecycletype.CIFailureQuery].
	CIFailureQuery = lifecycletype.CIFailureQuery
	// CIFailureRecord is [lifecycletype.CIFailureRecord].
	CIFailureRecord = lifecycletype.CIFailureRecord
	// CIFailureStore is [lifecycletype.CIFailureStore].
	CIFailureStore = lifecycletype.CIFailureStore
	// CIFailureTx is [lifecycletype.CIFailureTx].
	CIFailureTx = lifecycletype.CIFailureTx
	// ClaimCIFailuresParams is [lifecycletype.ClaimCIFailuresParams].
	ClaimCIFailuresParams = lifecycletype.ClaimCIFailuresParams
	// TaskCIFailedData is [lifecycletype.TaskCIFailedData].
	TaskCIFailedData = lifecycletype.TaskCIFailedData
	// FailedCheck is [lifecycletype.FailedCheck].
	FailedCheck = lifecycletype.FailedCheck
	// DependencyTx is [lifecycletype.DependencyTx].
	DependencyTx = lifecycletype.DependencyTx
	// QueueRework is [lifecycletype.QueueRework].
	QueueRework = lifecycletype.QueueRework
	// QueueReworkError is [lifecycletype.QueueReworkError].
	QueueReworkError = lifecycletype.QueueReworkError
	// MergeQueue is [lifecycletype.MergeQueue].
	MergeQueue = lifecycletype.MergeQueue
	// MergeQueueEntry is [lifecycletype.MergeQueueEntry].
	MergeQueueEntry = lifecycletype.MergeQueueEntry
	// MergeQueueCandidate is [lifecycletype.MergeQueueCandidate].
	MergeQueueCandidate = lifecycletype.MergeQueueCandidate
	// MergeQueuePullRequest is [lifecycletype.MergeQueuePullRequest].
	MergeQueuePullRequest = lifecycletype.MergeQueuePullRequest
	// MergeQueueStats is [lifecycletype.MergeQueueStats].
	MergeQueueStats = lifecycletype.MergeQueueStats
	// MergeQueueEvent is [lifecycletype.MergeQueueEvent].
	MergeQueueEvent = lifecycletype.MergeQueueEvent
	// TaskMergeQueueData is [lifecycletype.TaskMergeQueueData].
	TaskMergeQueueData = lifecycletype.TaskMergeQueueData
	// TaskStalledData is [lifecycletype.TaskStalledData].
	TaskStalledData = lifecycletype.TaskStalledData
	// Stall is [lifecycletype.Stall].
	Stall = lifecycletype.Stall
	// StallMarker is [lifecycletype.StallMarker].
	StallMarker = lifecycletype.StallMarker
	// MarkStalledParams is [lifecycletype.MarkStalledParams].
	MarkStalledParams = lifecycletype.MarkStalledParams
	// StallRule is [lifecycletype.StallRule].
	StallRule = lifecycletype.StallRule
	// ConsoleSession is [lifecycletype.ConsoleSession].
	ConsoleSession = lifecycletype.ConsoleSession
	// FailureClassifier is [lifecycletype.FailureClassifier].
	FailureClassifier = lifecycletype.FailureClassifier
	// RelaxedUpdater is [lifecycletype.RelaxedUpdater].
	RelaxedUpdater = lifecycletype.RelaxedUpdater
	// ShipQueueCounter is [lifecycletype.ShipQueueCounter].
	ShipQueueCounter = lifecycletype.ShipQueueCounter
	// TaskRevisioner is [lifecycletype.TaskRevisioner].
	TaskRevisioner = lifecycletype.TaskRevisioner
	// InProgressCounter is [lifecycletype.InProgressCounter].
	InProgressCounter = lifecycletype.InProgressCounter
	// ShipQueueCounts is [lifecycletype.ShipQueueCounts].
	ShipQueueCounts = lifecycletype.ShipQueueCounts
	// InstanceLeaser is [lifecycletype.InstanceLeaser].
	InstanceLeaser = lifecycletype.InstanceLeaser
	// UpdateInstanceLeaseParams is [lifecycletype.UpdateInstanceLeaseParams].
	UpdateInstanceLeaseParams = lifecycletype.UpdateInstanceLeaseParams
	// EventBounds is [lifecycletype.EventBounds].
	EventBounds = lifecycletype.EventBounds
	// PruneParams is [lifecycletype.PruneParams].
	PruneParams = lifecycletype.PruneParams
	// PruneResult is [lifecycletype.PruneResult].
	PruneResult = lifecycletype.PruneResult
	// PutChecksParams is [lifecycletype.PutChecksParams].
	PutChecksParams = lifecycletype.PutChecksParams
	// ClaimShipOperationsParams is [lifecycletype.ClaimShipOperationsParams].
	ClaimShipOperationsParams = lifecycletype.ClaimShipOperationsParams
	// ClaimReconciliationsParams is [lifecycletype.ClaimReconciliationsParams].
	ClaimReconciliationsParams = lifecycletype.ClaimReconciliationsParams
	// SecretResealer is [lifecycletype.SecretResealer].
	SecretResealer = lifecycletype.SecretResealer
	// InstanceLease is [lifecycletype.InstanceLease].
	InstanceLease = lifecycletype.InstanceLease
	// IdempotencyScope is [lifecycletype.IdempotencyScope].
	IdempotencyScope = lifecycletype.IdempotencyScope
	// IdempotencyRecord is [lifecycletype.IdempotencyRecord].
	IdempotencyRecord = lifecycletype.IdempotencyRecord
	// SubmitMode is [lifecycletype.SubmitMode].
	SubmitMode = lifecycletype.SubmitMode
	// SubmissionAction is [lifecycletype.SubmissionAction].
	SubmissionAction = lifecycletype.SubmissionAction
	// Participant is [lifecycletype.Participant].
	Participant = lifecycletype.Participant
	// ReviewRoute is [lifecycletype.ReviewRoute].
	ReviewRoute = lifecycletype.ReviewRoute
	// Submission is [lifecycletype.Submission].
	Submission = lifecycletype.Submission
	// Review is [lifecycletype.Review].
	Review = lifecycletype.Review
	// CheckSource is [lifecycletype.CheckSource].
	CheckSource = lifecycletype.CheckSource
	// Check is [lifecycletype.Check].
	Check = lifecycletype.Check
	// SubscriptionStatus is [lifecycletype.SubscriptionStatus].
	SubscriptionStatus = lifecycletype.SubscriptionStatus
	// Subscription is [lifecycletype.Subscription].
	Subscription = lifecycletype.Subscription
	// SubscriptionFilters is [lifecycletype.SubscriptionFilters].
	SubscriptionFilters = lifecycletype.SubscriptionFilters
	// DeliveryStatus is [lifecycletype.DeliveryStatus].
	DeliveryStatus = lifecycletype.DeliveryStatus
	// Delivery is [lifecycletype.Delivery].
	Delivery = lifecycletype.Delivery
	// ListSubscriptionsParams is [lifecycletype.ListSubscriptionsParams].
	ListSubscriptionsParams = lifecycletype.ListSubscriptionsParams
	// SubscriptionPage is [lifecycletype.SubscriptionPage].
	SubscriptionPage = lifecycletype.SubscriptionPage
	// ClaimSubscriptionsParams is [lifecycletype.ClaimSubscriptionsParams].
	ClaimSubscriptionsParams = lifecycletype.ClaimSubscriptionsParams
	// DeliveryFilter is [lifecycletype.DeliveryFilter].
	DeliveryFilter = lifecycletype.DeliveryFilter
	// DeliveryPage is [lifecycletype.DeliveryPage].
	DeliveryPage = lifecycletype.DeliveryPage
	// RefusedTargetError is [lifecycletype.RefusedTargetError].
	RefusedTargetError = lifecycletype.RefusedTargetError
	// Status is [lifecycletype.Status].
	Status = lifecycletype.Status
	// Priority is [lifecycletype.Priority].
	Priority = lifecycletype.Priority
	// Action is [lifecycletype.Action].
	Action = lifecycletype.Action
	// AssignmentSource is [lifecycletype.AssignmentSource].
	AssignmentSource = lifecycletype.AssignmentSource
	// Agent is [lifecycletype.Agent].
	Agent = lifecycletype.Agent
	// TaskLinks is [lifecycletype.TaskLinks].
	TaskLinks = lifecycletype.TaskLinks
	// TaskContext is [lifecycletype.TaskContext].
	TaskContext = lifecycletype.TaskContext
	// Blocker is [lifecycletype.Blocker].
	Blocker = lifecycletype.Blocker
	// Task is [lifecycletype.Task].
	Task = lifecycletype.Task
	// TaskFilter is [lifecycletype.TaskFilter].
	TaskFilter = lifecycletype.TaskFilter
	// TaskPage is [lifecycletype.TaskPage].
	TaskPage = lifecycletype.TaskPage
	// Timestamp is [lifecycletype.Timestamp].
	Timestamp = lifecycletype.Timestamp
	// Clock is [lifecycletype.Clock].
	Clock = lifecycletype.Clock
	// FieldError is [lifecycletype.FieldError].
	FieldError = lifecycletype.FieldError
	// ValidationError is [lifecycletype.ValidationError].
	ValidationError = lifecycletype.ValidationError
	// ErrorBody is [lifecycletype.ErrorBody].
	ErrorBody = lifecycletype.ErrorBody
	// ErrorObject is [lifecycletype.ErrorObject].
	ErrorObject = lifecycletype.ErrorObject
	// ErrorDetails is [lifecycletype.ErrorDetails].
	ErrorDetails = lifecycletype.ErrorDetails
	// ConflictError is [lifecycletype.ConflictError].
	ConflictError = lifecycletype.ConflictError
)

// The constants of those types; see package lifecycletype.
const (
	ReadSweep                         = lifecycletype.ReadSweep
	ReadNow                           = lifecycletype.ReadNow
	ReadMerge                         = lifecycletype.ReadMerge
	PullRequestOpen                   = lifecycletype.PullRequestOpen
	PullRequestClosed                 = lifecycletype.PullRequestClosed
	PullRequestMerged                 = lifecycletype.PullRequestMerged
	MergeabilityMergeable             = lifecycletype.MergeabilityMergeable
	MergeabilityConflicting           = lifecycletype.MergeabilityConflicting
	MergeabilityBehind                = lifecycletype.MergeabilityBehind
	MergeabilityUnknown               = lifecycletype.MergeabilityUnknown
	MergeabilityBlocked               = lifecycletype.MergeabilityBlocked
	CheckPassed                       = lifecycletype.CheckPassed
	CheckFailed                       = lifecycletype.CheckFailed
	CheckRunning                      = lifecycletype.CheckRunning
	CheckSkipped                      = lifecycletype.CheckSkipped
	ScopeTasksRead                    = lifecycletype.ScopeTasksRead
	ScopeTasksWrite                   = lifecycletype.ScopeTasksWrite
	ScopeShipWrite                    = lifecycletype.ScopeShipWrite
	ScopeEventsRead                   = lifecycletype.ScopeEventsRead
	ScopeWebhooksRead                 = lifecycletype.ScopeWebhooksRead
	ScopeWebhooksWrite                = lifecycletype.ScopeWebhooksWrite
	ScopeTasksAdmin                   = lifecycletype.ScopeTasksAdmin
	ScopeReviewsWrite                 = lifecycletype.ScopeReviewsWrite
	ScopeCIWrite                      = lifecycletype.ScopeCIWrite
	ScopeKeysAdmin                    = lifecycletype.ScopeKeysAdmin
	CIPassed                          = lifecycletype.CIPassed
	CIFailed                          = lifecycletype.CIFailed
	CIRunning                         = lifecycletype.CIRunning
	CIPending                         = lifecycletype.CIPending
	CINone                            = lifecycletype.CINone
	EventTaskUpdated                  = lifecycletype.EventTaskUpdated
	EventTaskReviewed                 = lifecycletype.EventTaskReviewed
	EventTaskShipped                  = lifecycletype.EventTaskShipped
	EventTaskAwaitingUser             = lifecycletype.EventTaskAwaitingUser
	RoleAgent                         = lifecycletype.RoleAgent
	RoleReviewer                      = lifecycletype.RoleReviewer
	RoleUser                          = lifecycletype.RoleUser
	RoleSystem                        = lifecycletype.RoleSystem
	ReworkChangesRequested            = lifecycletype.ReworkChangesRequested
	ReworkMergeConflict               = lifecycletype.ReworkMergeConflict
	ReworkBehindBase                  = lifecycletype.ReworkBehindBase
	ReworkCIFailed                    = lifecycletype.ReworkCIFailed
	ProviderHeadChanged               = lifecycletype.ProviderHeadChanged
	ProviderPullRequestClosed         = lifecycletype.ProviderPullRequestClosed
	ProviderPullRequestMerged         = lifecycletype.ProviderPullRequestMerged
	ProviderPullRequestReopened       = lifecycletype.ProviderPullRequestReopened
	ProviderPullRequestEdited         = lifecycletype.ProviderPullRequestEdited
	ProviderReviewSubmitted           = lifecycletype.ProviderReviewSubmitted
	ProviderReviewDismissed           = lifecycletype.ProviderReviewDismissed
	ProviderChecksChanged             = lifecycletype.ProviderChecksChanged
	ProviderDeploymentStatus          = lifecycletype.ProviderDeploymentStatus
	ReviewApproved                    = lifecycletype.ReviewApproved
	ReviewChangesRequested            = lifecycletype.ReviewChangesRequested
	ReviewCommented                   = lifecycletype.ReviewCommented
	DecisionApproved                  = lifecycletype.DecisionApproved
	DecisionChangesRequested          = lifecycletype.DecisionChangesRequested
	DecisionPending                   = lifecycletype.DecisionPending
	DecisionNotRequired               = lifecycletype.DecisionNotRequired
	PolicyGitHubRules                 = lifecycletype.PolicyGitHubRules
	PolicyAlwaysRequire               = lifecycletype.PolicyAlwaysRequire
	PolicyNeverRequire                = lifecycletype.PolicyNeverRequire
	ShipQueued                        = lifecycletype.ShipQueued
	ShipRunning                       = lifecycletype.ShipRunning
	ShipSucceeded                     = lifecycletype.ShipSucceeded
	ShipFailed                        = lifecycletype.ShipFailed
	EnvironmentStaging                = lifecycletype.EnvironmentStaging
	EnvironmentProduction             = lifecycletype.EnvironmentProduction
	ShipMergeOnly                     = lifecycletype.ShipMergeOnly
	ShipMergeAndDeploy                = lifecycletype.ShipMergeAndDeploy
	WaitMergeabilityUnknown           = lifecycletype.WaitMergeabilityUnknown
	WaitMergeTrain                    = lifecycletype.WaitMergeTrain
	WaitMergeQueue                    = lifecycletype.WaitMergeQueue
	ReworkChecksFailed                = lifecycletype.ReworkChecksFailed
	EventTaskMergeQueue               = lifecycletype.EventTaskMergeQueue
	EventTaskStalled                  = lifecycletype.EventTaskStalled
	EventTaskCIFailed                 = lifecycletype.EventTaskCIFailed
	AnnotationNotice                  = lifecycletype.AnnotationNotice
	AnnotationWarning                 = lifecycletype.AnnotationWarning
	AnnotationFailure                 = lifecycletype.AnnotationFailure
	ModeAdapterManaged                = lifecycletype.ModeAdapterManaged
	ModeArtifact                      = lifecycletype.ModeArtifact
	SubmissionCreated                 = lifecycletype.SubmissionCreated
	SubmissionExisting                = lifecycletype.SubmissionExisting
	SubmissionAccepted                = lifecycletype.SubmissionAccepted
	SourceProvider                    = lifecycletype.SourceProvider
	SourceReported                    = lifecycletype.SourceReported
	SourceSelfReported                = lifecycletype.SourceSelfReported
	SubscriptionActive                = lifecycletype.SubscriptionActive
	SubscriptionDisabled              = lifecycletype.SubscriptionDisabled
	DeliveryPending                   = lifecycletype.DeliveryPending
	DeliverySucceeded                 = lifecycletype.DeliverySucceeded
	DeliveryFailed                    = lifecycletype.DeliveryFailed
	StatusTodo                        = lifecycletype.StatusTodo
	StatusInProgress                  = lifecycletype.StatusInProgress
	StatusInReview                    = lifecycletype.StatusInReview
	StatusBlocked                     = lifecycletype.StatusBlocked
	StatusDone                        = lifecycletype.StatusDone
	StatusCancelled                   = lifecycletype.StatusCancelled
	PriorityLow                       = lifecycletype.PriorityLow
	PriorityMedium                    = lifecycletype.PriorityMedium
	PriorityHigh                      = lifecycletype.PriorityHigh
	PriorityCritical                  = lifecycletype.PriorityCritical
	ActionStart                       = lifecycletype.ActionStart
	ActionSubmit                      = lifecycletype.ActionSubmit
	ActionShip                        = lifecycletype.ActionShip
	ActionViewCIStatus                = lifecycletype.ActionViewCIStatus
	ActionViewReviewFeedback          = lifecycletype.ActionViewReviewFeedback
	ActionResolveBlocker              = lifecycletype.ActionResolveBlocker
	AssignmentDeterministicRule       = lifecycletype.AssignmentDeterministicRule
	AssignmentClassifier              = lifecycletype.AssignmentClassifier
	AssignmentClassifierBestEffort    = lifecycletype.AssignmentClassifierBestEffort
	AssignmentManualTriage            = lifecycletype.AssignmentManualTriage
	AssignmentProviderAssigneeMapping = lifecycletype.AssignmentProviderAssigneeMapping
)

// The sentinel errors; see package lifecycletype.
var (
	ErrNotFound          = lifecycletype.ErrNotFound
	ErrConflict          = lifecycletype.ErrConflict
	ErrValidation        = lifecycletype.ErrValidation
	ErrUnauthorized      = lifecycletype.ErrUnauthorized
	ErrInsufficientScope = lifecycletype.ErrInsufficientScope
	ErrPayloadTooLarge   = lifecycletype.ErrPayloadTooLarge
	ErrCursorExpired     = lifecycletype.ErrCursorExpired
	ErrRateLimited       = lifecycletype.ErrRateLimited
	ErrRequestTimeout    = lifecycletype.ErrRequestTimeout
	ErrCSRF              = lifecycletype.ErrCSRF
	ErrClosed            = lifecycletype.ErrClosed
	ErrUnavailable       = lifecycletype.ErrUnavailable
	ErrHeadMismatch      = lifecycletype.ErrHeadMismatch
	ErrBranchMoved       = lifecycletype.ErrBranchMoved
	ErrTemporary         = lifecycletype.ErrTemporary
	ErrInvalidSignature  = lifecycletype.ErrInvalidSignature
	ErrInstanceInUse     = lifecycletype.ErrInstanceInUse
	ErrProvider          = lifecycletype.ErrProvider
)

// Scopes is [lifecycletype.Scopes].
func Scopes() []Scope { return lifecycletype.Scopes() }

// SystemActor is [lifecycletype.SystemActor].
func SystemActor() Actor { return lifecycletype.SystemActor() }

// NewTimestamp is [lifecycletype.NewTimestamp].
func NewTimestamp(t time.Time) Timestamp { return lifecycletype.NewTimestamp(t) }
