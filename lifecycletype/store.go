package lifecycletype

import (
	"context"
	"time"
)

// Store keeps tasks, their events and everything else the Service must not
// lose. store/sqlite is the included implementation; store/storetest is the
// conformance suite every implementation runs.
//
// Reads outside a transaction may run concurrently with each other and with
// Update. Every state change happens inside Update, whose Tx lets the Service
// read, check and write in one atomic step: the state machine's rules stay in
// this package while the Store owns atomicity.
//
// Errors: methods return an error matching ErrNotFound when the record asked
// for does not exist, ErrConflict when a uniqueness rule would be broken, and
// ErrClosed after Close; other errors are failures of the store itself.
type Store interface {
	Reader

	// ListTasks returns the tasks that match the filter, in creation order.
	ListTasks(ctx context.Context, f TaskFilter) (TaskPage, error)

	// Events returns up to f.Limit events with a sequence greater than
	// f.After that match the filter, in sequence order. Once an event with
	// sequence N has been returned, no event with a smaller sequence may
	// commit later: readers never skip an event.
	Events(ctx context.Context, f EventFilter) ([]Event, error)
	// EventBounds returns the greatest sequence of a committed event and
	// the greatest one Prune deleted, read together.
	EventBounds(ctx context.Context) (EventBounds, error)

	// Submissions returns every submission of a task, oldest first; a
	// task without submissions, or an unknown one, has none.
	Submissions(ctx context.Context, taskID string) ([]Submission, error)
	// ShipOperations returns every ship operation of a task, oldest first;
	// a task without any, or an unknown one, has none.
	ShipOperations(ctx context.Context, taskID string) ([]ShipOperation, error)

	// ProviderDelivery returns the record of a webhook delivery from a
	// code host, if it was applied.
	ProviderDelivery(ctx context.Context, source, id string) (ProviderDelivery, error)

	// APIKeyByHash returns the API key whose plaintext hashes to hash,
	// revoked or not.
	APIKeyByHash(ctx context.Context, hash []byte) (APIKey, error)
	// ListAPIKeys returns every API key, revoked ones included, in creation order.
	ListAPIKeys(ctx context.Context) ([]APIKey, error)

	// ListSubscriptions returns the subscriptions after p.After, in
	// creation order.
	ListSubscriptions(ctx context.Context, p ListSubscriptionsParams) (SubscriptionPage, error)
	// Deliveries returns the delivery attempts of a subscription that match
	// the filter: newest first, or, with f.Pending, the pending ones with
	// their Body, earliest NextAttemptAt first. An unknown subscription has
	// none.
	Deliveries(ctx context.Context, f DeliveryFilter) (DeliveryPage, error)

	// Prune deletes what has outlived its retention, as p says, and
	// returns how many records of each kind it deleted. It deletes the
	// kinds one after the other, each in as many steps as it likes (a
	// large prune should not hold up writers for long); when one kind
	// fails it goes on with the next, and returns what it deleted with
	// the failures joined. Sequences of pruned events are never reused.
	Prune(ctx context.Context, p PruneParams) (PruneResult, error)

	// Update runs fn in a transaction and commits it when fn returns nil.
	// When fn returns an error, nothing it wrote is kept and Update returns
	// that error. When Update returns nil the change is durable. fn may be
	// called more than once if the store retries a transaction, so it must
	// not have effects outside tx; it should not block on anything but tx.
	Update(ctx context.Context, fn func(tx Tx) error) error

	// Close releases the store's resources. Pending calls may fail with ErrClosed.
	Close() error
}

// Reader is the reads a [Store] and its [Tx] both make. Through a Tx,
// Task and ShipOperation read for update: no other transaction changes
// the record before this one ends.
type Reader interface {
	// Task returns the task with the given ID.
	Task(ctx context.Context, id string) (Task, error)
	// Reviews returns the reviews of a submission, oldest first.
	Reviews(ctx context.Context, submissionID string) ([]Review, error)
	// Checks returns the checks recorded for a task's commit, ordered by
	// source and name.
	Checks(ctx context.Context, taskID, headSHA string) ([]Check, error)
	// ShipOperation returns the ship operation with the given ID.
	ShipOperation(ctx context.Context, id string) (ShipOperation, error)
	// Subscription returns the webhook subscription with the given ID.
	Subscription(ctx context.Context, id string) (Subscription, error)
}

// InProgressCounter is implemented by a Store, and by its Tx, that count
// an agent's tasks in progress: lifecycle.Config.MaxInProgressPerAgent
// needs it of the Store and of the Tx its Update passes (lifecycle.New
// refuses the cap with a Store without it; a start through a Tx without
// it fails). The SQLite, PostgreSQL and memory stores implement it on
// both.
type InProgressCounter interface {
	// CountInProgress returns how many tasks assigned to the agent are
	// in progress, from an index (it does not read every task). Through a
	// Tx it also locks the agent's count: a transaction that counts the
	// same agent's tasks through its own Tx waits until this one ends,
	// and then counts what it committed.
	CountInProgress(ctx context.Context, agentID string) (int, error)
}

// Tx is a Store transaction, valid only inside the function passed to
// [Store.Update]. It has the same error contract as Store.
type Tx interface {
	Reader

	// CreateTask inserts a new task. It returns ErrConflict when a task
	// with the same ID or Identifier exists.
	CreateTask(ctx context.Context, t Task) error
	// UpdateTask replaces the stored task that has t.ID with t.
	UpdateTask(ctx context.Context, t Task) error
	// AppendEvent appends e to the outbox and sets e.Sequence to the next
	// sequence number.
	AppendEvent(ctx context.Context, e *Event) error

	// Submission returns the submission with the given ID.
	Submission(ctx context.Context, id string) (Submission, error)
	// CreateSubmission inserts a new submission.
	CreateSubmission(ctx context.Context, sub Submission) error
	// CreateReview inserts a new review.
	CreateReview(ctx context.Context, r Review) error
	// PutChecks records p.Checks, each replacing the check with the same
	// task, commit, source and name; with p.Replace, it also deletes the
	// other checks of the commit from p.Source.
	PutChecks(ctx context.Context, p PutChecksParams) error
	// RecordProviderDelivery records a webhook delivery as applied. It
	// returns ErrConflict when one with the same source and ID is recorded.
	RecordProviderDelivery(ctx context.Context, d ProviderDelivery) error

	// CreateShipOperation inserts a new ship operation.
	CreateShipOperation(ctx context.Context, op ShipOperation) error
	// UpdateShipOperation replaces the stored operation with op.ID.
	UpdateShipOperation(ctx context.Context, op ShipOperation) error
	// ClaimShipOperations takes up to p.Limit operations for p.Owner, oldest
	// first: queued ones, running ones whose lease ended before p.Now, and,
	// when p.Resume is set, running ones whose LeaseOwner is p.Owner. Each
	// becomes running with Attempts one more, StartedAt set if it was not,
	// LeaseOwner p.Owner and LeaseUntil p.Until; the claimed operations
	// are returned as stored.
	//
	// Locking contract: the claim is one atomic step. When several
	// processes claim at once, each operation goes to one of them (SQL
	// stores: SELECT ... FOR UPDATE SKIP LOCKED, then UPDATE, in one
	// statement or transaction).
	ClaimShipOperations(ctx context.Context, p ClaimShipOperationsParams) ([]ShipOperation, error)
	// ClaimReconciliations takes up to p.Limit tasks whose ReconcileAt is
	// not after p.Now, earliest first: tasks in review, and tasks in
	// progress whose ReconcileAt is not zero (their pull request was closed
	// at the host, and a reopen is looked for). It sets their ReconcileAt
	// to p.Until and returns them as stored. Until then no other claim
	// returns them: p.Until is the lease of the reconciler that claimed
	// them, which sets their next reading when it is done. The locking
	// contract is the one of ClaimShipOperations.
	ClaimReconciliations(ctx context.Context, p ClaimReconciliationsParams) ([]Task, error)

	// UpdateIdempotencyRecord reads the record of scope's key for update
	// and calls fn with it, or with nil when the key has none. It then
	// stores what fn returns: a record replaces the key's record, or is
	// inserted when there was none; nil deletes the key's record, if any.
	// When fn returns an error, nothing is stored and UpdateIdempotencyRecord
	// returns that error. An insert returns ErrConflict when the key has a
	// record already, even one written by a transaction that committed
	// after this one began.
	UpdateIdempotencyRecord(ctx context.Context, scope IdempotencyScope, fn func(cur *IdempotencyRecord) (*IdempotencyRecord, error)) error

	// CreateAPIKey inserts a new key. It returns ErrConflict when a key
	// with the same ID or hash exists.
	CreateAPIKey(ctx context.Context, k APIKey) error
	// RevokeAPIKey sets the RevokedAt of the key with the given ID, if not
	// set yet, and returns the key.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) (APIKey, error)

	// CreateSubscription inserts a new subscription. It returns ErrConflict
	// when one with the same ID exists.
	CreateSubscription(ctx context.Context, sub Subscription) error
	// UpdateSubscription replaces the Status, Cursor, LeaseOwner,
	// LeaseUntil, Revision, Rewound and RewindTo of the stored subscription with
	// sub.ID; the rest of a subscription never changes. It returns
	// ErrNotFound when there is none.
	UpdateSubscription(ctx context.Context, sub Subscription) error
	// DeleteSubscription deletes a subscription and all its delivery
	// attempts. It returns ErrNotFound when there is none.
	DeleteSubscription(ctx context.Context, id string) error
	// ClaimSubscriptions leases subscriptions to p.Owner until p.Until: it
	// renews every active subscription p.Owner holds, and takes at most
	// p.Max more active ones whose lease ended before p.Now, oldest lease
	// first. It returns every active subscription p.Owner then holds, in
	// creation order. It is one atomic operation, safe when several
	// processes claim at once: a subscription is leased to one owner at a
	// time, and only that owner's claims return it.
	ClaimSubscriptions(ctx context.Context, p ClaimSubscriptionsParams) ([]Subscription, error)
	// CreateDelivery inserts a delivery attempt. It returns ErrNotFound
	// when its subscription does not exist, and ErrConflict when an attempt
	// with the same ID does.
	CreateDelivery(ctx context.Context, d Delivery) error

	// Delivery returns the delivery attempt with the given ID, Body
	// included, read for update.
	Delivery(ctx context.Context, id string) (Delivery, error)
	// UpdateDelivery replaces the Status, ResponseStatus, Error,
	// NextAttemptAt and Body of the stored attempt with d.ID. It returns
	// ErrNotFound when there is none.
	UpdateDelivery(ctx context.Context, d Delivery) error
}

// DependencyTx is implemented by the Tx of a Store that keeps the edges
// of the tasks' dependencies (Task.DependsOn), so that the Service finds
// the tasks waiting on one that becomes done without reading the others.
// The stores of this module implement it. A Service whose Store's Tx lacks
// it refuses dependencies (400 on dependsOn).
type DependencyTx interface {
	// Dependents returns the IDs of the tasks whose DependsOn holds
	// taskID, in creation order, as this transaction sees them: CreateTask
	// and UpdateTask keep the edges from each task's DependsOn. An
	// unknown task has none.
	Dependents(ctx context.Context, taskID string) ([]string, error)
}

// ConsoleSessionStore is implemented by a Store that keeps the sign-ins of
// the operator console (package console, which finds it by type
// assertion). A Store without it serves the API, but no console. Its
// methods are not transactional: each is one atomic step, with the error
// contract of Store.
type ConsoleSessionStore interface {
	// ConsoleSession returns the console session whose token hashes to
	// hash, expired or not.
	ConsoleSession(ctx context.Context, hash []byte) (ConsoleSession, error)
	// CreateConsoleSession inserts a console session. It returns
	// ErrConflict when one with the same Hash exists.
	CreateConsoleSession(ctx context.Context, cs ConsoleSession) error
	// DeleteConsoleSession deletes the console session whose token hashes
	// to hash. It returns ErrNotFound when there is none.
	DeleteConsoleSession(ctx context.Context, hash []byte) error
	// DeleteConsoleSessionsBefore deletes the console sessions that
	// expired before t and returns how many it deleted.
	DeleteConsoleSessionsBefore(ctx context.Context, t time.Time) (int64, error)
}

// ConsoleSession is a sign-in to the operator console (package console):
// the browser holds a random token in an HttpOnly cookie, and the Store
// keeps only the token's hash. The session acts with the API key it was
// opened with, under that key's scopes, until it expires or the key is
// revoked.
type ConsoleSession struct {
	// Hash is the SHA-256 of the session token.
	Hash []byte
	// KeyID is the ID of the API key the session was opened with.
	KeyID string
	// KeyHash is that key's hash, by which every request of the session
	// finds the key again (and finds it revoked).
	KeyHash []byte
	// CreatedAt is when the session was opened.
	CreatedAt Timestamp
	// ExpiresAt is when the session ends, whatever happens to its key.
	ExpiresAt Timestamp
}

// FailureClassifier is implemented by a Store that can tell its failures
// that may pass (its database restarting or out of reach, its disk full,
// a connection lost) from the others. The Service answers a request that
// met one 503 store_unavailable with Retry-After, instead of 500, and its
// background work tries again. Without it, every failure of the Store is
// a 500.
type FailureClassifier interface {
	// Unavailable reports whether err, returned by one of the Store's
	// methods (possibly wrapped), is such a failure.
	Unavailable(err error) bool
}

// RelaxedUpdater is implemented by a Store that can commit a transaction
// without waiting for it to reach the disk. The Service uses it for
// changes whose loss in a power cut harms nothing, such as reserving an
// idempotency key: a request that made no other change simply runs again.
// Such a commit must still be visible to every reader at once, and must
// become durable no later than the next durable commit.
type RelaxedUpdater interface {
	// UpdateRelaxed is [Store.Update] for a change that may be lost in a
	// power cut (not in a crash of the process).
	UpdateRelaxed(ctx context.Context, fn func(tx Tx) error) error
}

// ShipQueueCounter is a Store that counts the ship operations not yet
// finished, for the gauge lifecycle.ship.queue.depth (see
// lifecycle.Config.MeterProvider). It is optional: a Service whose Store lacks it
// reports no queue depth.
type ShipQueueCounter interface {
	// CountShipQueue returns how many ship operations are queued and how
	// many are running, in every process that shares the Store.
	CountShipQueue(ctx context.Context) (ShipQueueCounts, error)
}

// TaskRevisioner is a Store that tells cheaply whether a task's row
// changed. It is optional: with it, a Service keeps the encoded answers
// of GET /tasks/{id} (see lifecycle.Config.TaskCacheBytes) and serves one again
// while the task's revision is the one it was read at, reading one column
// instead of the whole row.
type TaskRevisioner interface {
	// TaskRevision returns the revision of the task with that ID, or an
	// error matching ErrNotFound. The revision changes with every write
	// of the task, whatever the write changes and whoever makes it (in
	// every process that shares the Store), and never takes a value it
	// had before; Store.Task called after TaskRevision returns the task
	// as it was at that revision or later.
	TaskRevision(ctx context.Context, id string) (int64, error)
}

// StallMarker is implemented by a Store that marks stalled tasks
// (lifecycle.Config.StallAfter). A Service whose Config.StallAfter is set
// needs it: lifecycle.New refuses that Config for a Store without it.
type StallMarker interface {
	// MarkStalled runs a transaction, as [Store.Update] does, that first
	// marks stalled up to p.Limit tasks that are not stalled, have no
	// ship operation (ActiveShipID is empty: the operation has timeouts
	// of its own) and whose LastActivityAt is before the Before of the
	// rule of their status (a task in a status no rule names is never
	// marked), then calls fn
	// with the transaction and the marked tasks, as stored. Each marked
	// task gets Stalled {Since: p.Now, LastActivityAt: its
	// LastActivityAt}, UpdatedAt p.Now and Version one more. The
	// transaction commits when fn returns nil; when fn returns an error
	// nothing is kept and MarkStalled returns that error.
	//
	// Costs and locking contract: the marking is one statement, which
	// finds the due tasks through an index (it reads no task that is not
	// due), and is atomic: when several processes mark at once, each task
	// is marked by one of them, once (SQL stores: the due rows are
	// selected FOR UPDATE SKIP LOCKED and updated, in one statement).
	MarkStalled(ctx context.Context, p MarkStalledParams, fn func(tx Tx, marked []Task) error) error
}

// MarkStalledParams says which tasks [StallMarker.MarkStalled] marks.
type MarkStalledParams struct {
	// Now is when they are marked.
	Now time.Time
	// Rules say, per status, which tasks are due: those whose
	// LastActivityAt is before the rule's Before. Each status appears
	// once at most, and is in_progress or in_review (the statuses
	// lifecycle.Config.StallAfter may watch, which a Store may index
	// alone).
	Rules []StallRule
	// Limit is the most tasks to mark, at least 1.
	Limit int
}

// StallRule is the rule of one status for [StallMarker.MarkStalled].
type StallRule struct {
	// Status is the status the rule watches.
	Status Status
	// Before is the time before which a task's last activity must be for
	// it to stall.
	Before time.Time
}

// ShipQueueCounts are the ship operations not yet finished.
type ShipQueueCounts struct {
	// Queued are accepted, not yet taken up by a runner.
	Queued int
	// Running are taken up by a runner (whose lease may have run out).
	Running int
}

// InstanceLeaser is implemented by a Store that keeps instance leases
// ([InstanceLease]), so that several Services may share it, each with
// its own lifecycle.Config.InstanceID: lifecycle.Service.Start takes the lease of its ID
// and refuses to run while another live process holds it. A Service on a
// Store without it serves as the only instance of that Store and takes no
// lease; lifecycle.New logs that once.
type InstanceLeaser interface {
	// UpdateInstanceLease reads the lease of p.ID (nil when there is none),
	// calls p.Update with it and stores the lease it returns, in one atomic
	// step: no other change of that lease comes in between. When p.Update
	// returns nil, nothing is stored; when it returns an error, nothing is
	// stored and UpdateInstanceLease returns that error. p.Update may be
	// called more than once if the store retries.
	UpdateInstanceLease(ctx context.Context, p UpdateInstanceLeaseParams) error
}

// UpdateInstanceLeaseParams says which instance lease
// [InstanceLeaser.UpdateInstanceLease] changes, and how.
type UpdateInstanceLeaseParams struct {
	// ID is the instance ID whose lease changes.
	ID string
	// Relaxed lets the store commit the change without waiting for it to
	// reach the disk, as [RelaxedUpdater.UpdateRelaxed] does: the Service
	// sets it when it renews or gives up its lease, whose loss in a power
	// cut harms nothing.
	Relaxed bool
	// Update is given the stored lease, or nil when there is none, and
	// returns the lease to store, or nil to store nothing.
	Update func(cur *InstanceLease) (*InstanceLease, error)
}

// EventBounds are the bounds of the stored events, as
// [Store.EventBounds] returns them.
type EventBounds struct {
	// Last is the greatest sequence of a committed event (pruned or not),
	// or 0: every event up to it that still exists is visible to
	// [Store.Events].
	Last int64
	// PrunedThrough is the greatest sequence of an event that
	// [Store.Prune] deleted, or 0: the events after it that still exist
	// are all there is.
	PrunedThrough int64
}

// PruneParams says what [Store.Prune] deletes. A zero time deletes
// nothing of its kinds.
type PruneParams struct {
	// Before prunes the events that occurred before it, the records of
	// provider deliveries ([ProviderDelivery]) received before it, and
	// the webhook delivery attempts made before it that are not pending:
	// a pending attempt is never pruned.
	Before time.Time
	// ExpiredBefore prunes the idempotency records that expired
	// (ExpiresAt) before it.
	ExpiredBefore time.Time
}

// PruneResult says how many records of each kind [Store.Prune] deleted.
type PruneResult struct {
	// Events is how many events were deleted.
	Events int64
	// ProviderDeliveries is how many provider delivery records were deleted.
	ProviderDeliveries int64
	// Deliveries is how many webhook delivery attempts were deleted.
	Deliveries int64
	// IdempotencyRecords is how many idempotency records were deleted.
	IdempotencyRecords int64
}

// PutChecksParams says which checks [Tx.PutChecks] records.
type PutChecksParams struct {
	// TaskID is the task the checks belong to.
	TaskID string
	// HeadSHA is the commit they ran on.
	HeadSHA string
	// Source is who reported them.
	Source CheckSource
	// Checks are the checks to record; each has the TaskID, HeadSHA and
	// Source above.
	Checks []Check
	// Replace also deletes the checks of the commit from Source whose
	// name is not among Checks: Checks become all there is from Source.
	Replace bool
}

// ClaimShipOperationsParams says which ship operations a runner claims.
type ClaimShipOperationsParams struct {
	// Owner names the claiming process; it becomes the LeaseOwner.
	Owner string
	// Now is the time of the claim; leases that ended before it are over.
	Now time.Time
	// Until is when the new leases end.
	Until time.Time
	// Limit is the most operations to claim, at least 1.
	Limit int
	// Resume also takes the running operations Owner holds already: a
	// process restarted with the same Owner resumes its earlier life's
	// work at once rather than when its leases end.
	Resume bool
}

// ClaimReconciliationsParams says which tasks a reconciler claims.
type ClaimReconciliationsParams struct {
	// Now is the time of the claim.
	Now time.Time
	// Until is the claimed tasks' new ReconcileAt.
	Until time.Time
	// Limit is the most tasks to claim, at least 1.
	Limit int
}

// SecretResealer is an optional interface of a [Store]: replacing the
// sealed secret of a webhook subscription, in one atomic step.
// lifecycle.Service.ResealWebhookSecrets needs it to finish a rotation of
// lifecycle.Config.WebhookSecretKey; the stores of this module implement it.
type SecretResealer interface {
	// UpdateSubscriptionSecret replaces the sealed secret of the
	// subscription with the given ID, and nothing else of it. It returns
	// an error matching ErrNotFound when there is none.
	UpdateSubscriptionSecret(ctx context.Context, id string, sealed []byte) error
}

// InstanceLease records that a live Service holds an instance ID
// (lifecycle.Config.InstanceID), so that a second live process started with the
// same ID is refused, while a process restarted after a crash takes its
// earlier life's work back at once.
type InstanceLease struct {
	// ID is the instance ID.
	ID string
	// Life identifies the process holding it: new each time a Service
	// starts.
	Life string
	// Until is when the lease ends unless renewed.
	Until time.Time
}

// IdempotencyScope identifies an idempotency key: the same key sent by
// another principal, to another route or about another resource is
// another key.
type IdempotencyScope struct {
	// PrincipalID is the caller's Principal.ID.
	PrincipalID string
	// Method and Route are the HTTP method and route pattern.
	Method string
	Route  string
	// ResourceID is the task or resource the request is about, or "".
	ResourceID string
	// Key is the Idempotency-Key header.
	Key string
}

// IdempotencyRecord is the Store's record of an idempotent request: first
// a reservation while the request runs, then its response.
type IdempotencyRecord struct {
	IdempotencyScope
	// Fingerprint is the SHA-256 of the request's method, route and
	// canonical body.
	Fingerprint []byte
	// Done says the request finished and StatusCode and Body hold its response.
	Done       bool
	StatusCode int
	Body       []byte
	// CreatedAt is when the key was first seen; ExpiresAt when the record
	// may be forgotten.
	CreatedAt time.Time
	ExpiresAt time.Time
	// LockedUntil is when a reservation that has not finished may be taken
	// over (its process is presumed dead).
	LockedUntil time.Time
	// Owner is the instance ID (lifecycle.Config.InstanceID) of the Service that
	// holds the reservation; a Service restarted with that ID takes its
	// earlier life's reservations over at once.
	Owner string
}
