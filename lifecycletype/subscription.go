package lifecycletype

import (
	"slices"
	"time"
)

// SubscriptionStatus says whether a webhook subscription receives deliveries.
type SubscriptionStatus string

// The statuses of a subscription.
const (
	// SubscriptionActive subscriptions receive deliveries.
	SubscriptionActive SubscriptionStatus = "active"
	// SubscriptionDisabled subscriptions receive nothing more: their
	// receiver answered 410 Gone.
	SubscriptionDisabled SubscriptionStatus = "disabled"
)

// Subscription is a webhook subscription: the events of some types,
// narrowed by filters, are POSTed to its URL, signed with its secret.
type Subscription struct {
	// ID begins "whs_".
	ID string `json:"id"`
	// URL is the https URL deliveries are POSTed to.
	URL string `json:"url"`
	// EventTypes are the types of the events delivered.
	EventTypes []EventType `json:"eventTypes"`
	// Description is the creator's note, or nil.
	Description *string `json:"description"`
	// Filters narrow the events delivered.
	Filters SubscriptionFilters `json:"filters"`
	// Status is active or disabled.
	Status SubscriptionStatus `json:"status"`
	// CreatedAt is when the subscription was created.
	CreatedAt Timestamp `json:"createdAt"`
	// AllowPrivateTarget lets the subscription's deliveries reach a host
	// that resolves to a loopback, private, link-local or otherwise
	// non-public address, which is refused for the others unless
	// lifecycle.Config.AllowPrivateWebhookTargets is set. Only the host program
	// sets it, through lifecycle.CreateSubscriptionParams.AllowPrivateTarget; the
	// HTTP API neither takes nor shows it. A Store keeps it with the
	// subscription.
	AllowPrivateTarget bool `json:"-"`

	// SealedSecret is the signing secret as stored: encrypted when the
	// Service has a lifecycle.Config.WebhookSecretKey. It is never serialised,
	// and the Service's methods return subscriptions without it (and
	// without Cursor and the lease): these are for the Store.
	SealedSecret []byte `json:"-"`
	// Cursor is the event sequence through which the first attempt of
	// every matching event has been recorded; delivery resumes after it.
	Cursor int64 `json:"-"`
	// LeaseOwner is the dispatcher that delivers for the subscription
	// until LeaseUntil, or "".
	LeaseOwner string `json:"-"`
	// LeaseUntil is when another dispatcher may take the subscription over.
	LeaseUntil time.Time `json:"-"`
	// Revision counts the changes an operator made to the subscription's
	// deliveries (a replay, a retry): the dispatcher holding it sees a new
	// revision at its next claim and looks again at what it must deliver.
	Revision int64 `json:"-"`
	// Rewound says a replay asked since the dispatcher last recorded its
	// deliveries for the events after RewindTo (the earliest, when there
	// were several) to be delivered again: the dispatcher reads on from
	// RewindTo, or from where it was if that is earlier. The replay also
	// moved Cursor back to RewindTo at most, so that a dispatcher that
	// starts afresh reads from there.
	Rewound bool `json:"-"`
	// RewindTo is the sequence after which a replay delivers again; it
	// means something only while Rewound is set.
	RewindTo int64 `json:"-"`
}

// SubscriptionFilters narrow the events of a subscription. An empty list
// does not narrow; lists that are set must all match.
type SubscriptionFilters struct {
	// TaskIDs, when not empty, keeps the events of these tasks.
	TaskIDs []string `json:"taskIds"`
	// Projects, when not empty, keeps the events of tasks of these projects.
	Projects []string `json:"projects"`
}

// Keeps reports whether an event passes the filters of sub.
func (sub *Subscription) Keeps(typ EventType, taskID, project string) bool {
	return slices.Contains(sub.EventTypes, typ) &&
		(len(sub.Filters.TaskIDs) == 0 || slices.Contains(sub.Filters.TaskIDs, taskID)) &&
		(len(sub.Filters.Projects) == 0 || slices.Contains(sub.Filters.Projects, project))
}

// DeliveryStatus is the outcome of a delivery attempt.
type DeliveryStatus string

// The statuses of a delivery attempt.
const (
	// DeliveryPending: the attempt failed and another is scheduled at
	// NextAttemptAt.
	DeliveryPending DeliveryStatus = "pending"
	// DeliverySucceeded: the receiver answered 2xx.
	DeliverySucceeded DeliveryStatus = "succeeded"
	// DeliveryFailed: the attempt failed and was followed by another, or
	// was the last one.
	DeliveryFailed DeliveryStatus = "failed"
)

// Delivery is one attempt to deliver an event to a subscription.
type Delivery struct {
	// EventID is the event delivered, also sent as X-Service-Event-Id.
	EventID string `json:"eventId"`
	// ID begins "dlv_"; it is new for every attempt and sent as
	// X-Service-Delivery-Id.
	ID string `json:"deliveryId"`
	// Attempt counts the attempts at delivering the event, from 1.
	Attempt int `json:"attempt"`
	// Status is the attempt's outcome.
	Status DeliveryStatus `json:"status"`
	// ResponseStatus is the receiver's HTTP status, or nil when there was
	// no answer.
	ResponseStatus *int `json:"responseStatus"`
	// Error says why the attempt failed, or is nil.
	Error *string `json:"error"`
	// AttemptedAt is when the attempt was made.
	AttemptedAt Timestamp `json:"attemptedAt"`
	// NextAttemptAt is when the next attempt is (or was) scheduled, or nil
	// when none was.
	NextAttemptAt *Timestamp `json:"nextAttemptAt"`

	// SubscriptionID is the subscription the attempt was made for.
	SubscriptionID string `json:"-"`
	// EventSequence is the event's sequence.
	EventSequence int64 `json:"-"`
	// Body is the request body, kept while the delivery is pending so that
	// retries send the same bytes even after the event is pruned.
	Body []byte `json:"-"`
}

// ListSubscriptionsParams says which page of subscriptions
// [Store.ListSubscriptions] returns. (The events a subscription receives
// are chosen by its [SubscriptionFilters].)
type ListSubscriptionsParams struct {
	// After, when not zero, keeps the subscriptions listed after the one
	// with this position (see [SubscriptionPage.Next]).
	After int64
	// Limit is the most subscriptions to return; the Store may assume 1..1000.
	Limit int
}

// SubscriptionPage is one page of a subscription listing.
type SubscriptionPage struct {
	// Subscriptions are in creation order.
	Subscriptions []Subscription
	// Next is the position to pass as ListSubscriptionsParams.After for the next
	// page, or 0 when there is none.
	Next int64
}

// ClaimSubscriptionsParams say what [Tx.ClaimSubscriptions] leases.
type ClaimSubscriptionsParams struct {
	// Owner identifies the claimer, such as one Service's dispatcher. Not
	// empty.
	Owner string
	// Now is the time of the claim: leases that ended before it may be
	// taken.
	Now time.Time
	// Until is when the leases taken or renewed end.
	Until time.Time
	// Max is the most subscriptions taken from other owners (or from none)
	// in this claim; those Owner holds already are renewed whatever their
	// number. Less than 1 takes none.
	Max int
}

// DeliveryFilter selects the delivery attempts of a subscription.
type DeliveryFilter struct {
	// SubscriptionID is the subscription whose attempts are listed.
	SubscriptionID string
	// EventID, when not empty, keeps the attempts at delivering this event.
	EventID string
	// Before, when not zero, keeps the attempts listed after the one with
	// this position (see [DeliveryPage.Next]), that is, older ones.
	Before int64
	// Pending keeps the attempts with status pending only, the ones a
	// dispatcher sends next: they come with their Body, earliest
	// NextAttemptAt first, on a single page (Before is not used, and Next
	// is 0).
	Pending bool
	// Limit is the most attempts to return; the Store may assume 1..1000.
	Limit int
}

// DeliveryPage is one page of a delivery listing.
type DeliveryPage struct {
	// Deliveries are newest first, or, for DeliveryFilter.Pending,
	// earliest NextAttemptAt first.
	Deliveries []Delivery
	// Next is the position to pass as DeliveryFilter.Before for the next
	// page, or 0 when there is none.
	Next int64
}

// Public returns sub without what the Store keeps for the dispatcher: the
// sealed secret, the cursor and the lease.
func (sub Subscription) Public() Subscription {
	sub.SealedSecret, sub.Cursor, sub.LeaseOwner, sub.LeaseUntil = nil, 0, "", time.Time{}
	return sub
}
