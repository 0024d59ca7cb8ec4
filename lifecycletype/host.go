package lifecycletype

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// TemporaryError is a failure worth retrying. It matches ErrTemporary and
// unwraps to its cause.
type TemporaryError struct {
	// Err is the cause.
	Err error
	// RetryAfter is how long the host asked to wait (a Retry-After header,
	// a rate limit's reset), or 0 to let the runner's backoff decide.
	RetryAfter time.Duration
	// RateLimited says the host's rate limit, or the share of it the
	// adapter keeps for the purpose of the call, is spent until RetryAfter
	// has passed. The ship runner waits for it however long it is (the
	// operation stays running and says why in [ShipOperation.Wait]), and
	// the reconciler reads the tasks concerned again once it has passed.
	RateLimited bool
	// Reason, when set, is a machine-readable word for what is awaited
	// ("mergeability_unknown": the host is working out whether it can
	// merge), which the ship runner shows in [ShipOperation.Wait] while it
	// waits to try again.
	Reason string
}

// Error implements error.
func (e *TemporaryError) Error() string {
	if e.RateLimited {
		return fmt.Sprintf("rate limited for %s: %v", e.RetryAfter, e.Err)
	}
	if e.RetryAfter > 0 {
		return fmt.Sprintf("temporary: %v (retry after %s)", e.Err, e.RetryAfter)
	}
	return "temporary: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *TemporaryError) Unwrap() error { return e.Err }

// Is reports whether target is ErrTemporary.
func (e *TemporaryError) Is(target error) bool { return target == ErrTemporary }

// RetryAfter returns the wait a *TemporaryError in err's chain asks for,
// or 0.
func RetryAfter(err error) time.Duration {
	var te *TemporaryError
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	return 0
}

// RateLimitWait returns the wait of an error that says a rate limit is
// spent (a *TemporaryError with RateLimited set), and whether it says so.
func RateLimitWait(err error) (time.Duration, bool) {
	var te *TemporaryError
	if errors.As(err, &te) && te.RateLimited {
		return te.RetryAfter, true
	}
	return 0, false
}

// ProviderEventKind says what a code host reported.
type ProviderEventKind string

// The provider event kinds.
const (
	// ProviderHeadChanged: commits were pushed to a pull request's branch.
	ProviderHeadChanged ProviderEventKind = "head_changed"
	// ProviderPullRequestClosed: a pull request was closed without merging.
	ProviderPullRequestClosed ProviderEventKind = "pull_request_closed"
	// ProviderPullRequestMerged: a pull request was merged.
	ProviderPullRequestMerged ProviderEventKind = "pull_request_merged"
	// ProviderPullRequestReopened: a closed pull request was reopened.
	ProviderPullRequestReopened ProviderEventKind = "pull_request_reopened"
	// ProviderPullRequestEdited: a pull request changed otherwise (its
	// base branch, say).
	ProviderPullRequestEdited ProviderEventKind = "pull_request_edited"
	// ProviderReviewSubmitted: a reviewer approved, requested changes or
	// commented.
	ProviderReviewSubmitted ProviderEventKind = "review_submitted"
	// ProviderReviewDismissed: a review was dismissed.
	ProviderReviewDismissed ProviderEventKind = "review_dismissed"
	// ProviderChecksChanged: a check run, commit status or pipeline of a
	// commit changed.
	ProviderChecksChanged ProviderEventKind = "checks_changed"
	// ProviderDeploymentStatus: a deployment reached a new status.
	ProviderDeploymentStatus ProviderEventKind = "deployment_status"
)

// ProviderEvent is what a code host reported through its webhook, turned
// into the host-agnostic terms of this package by an adapter. The Service
// treats it as a hint: it never trusts the event's content, but re-reads
// the pull requests it names through their adapter and applies what it
// reads (see lifecycle.Service.ApplyProviderEvent).
type ProviderEvent struct {
	// Source names the host the event came from, such as "github"; with
	// DeliveryID it identifies the delivery.
	Source string
	// DeliveryID is the host's ID of the webhook delivery (GitHub's
	// X-GitHub-Delivery), or "". A delivery applied once is not applied
	// again.
	DeliveryID string
	// Digest is the lowercase hex SHA-256 of the delivery's body, set by
	// an adapter whose host signs its bodies once the signature is
	// verified, or "". A delivery whose DeliveryID or Digest was applied
	// before is ignored: the ID is a header the signature does not cover,
	// so a signed body replayed under a new ID is recognised by its
	// digest, and the host's redelivery of a failed delivery (the same ID
	// and body) by either.
	Digest string
	// Kind says what happened.
	Kind ProviderEventKind
	// PullRequest names the pull request concerned. For checks that name
	// only a commit it may be zero; HeadSHA then says which tasks it
	// concerns.
	PullRequest PullRequestRef
	// HeadSHA is the commit concerned, when the host names one.
	HeadSHA string
	// Deployment is set for ProviderDeploymentStatus.
	Deployment *DeploymentStatus
}

// DeploymentStatus is a deployment's state as its host reports it.
type DeploymentStatus struct {
	// ID identifies the deployment at the host (Deployment.ID).
	ID string
	// State is the host's word for it, such as "success", "failure",
	// "in_progress".
	State string
	// EnvironmentURL is where the deployment can be seen, if any.
	EnvironmentURL string
}

// DeploymentObserver is implemented by a Deployer that wants to hear of
// deployment statuses the host reports by webhook, so that a Deploy
// waiting for a terminal status need not poll.
type DeploymentObserver interface {
	// ObserveDeployment is told of a deployment status. It must return
	// quickly.
	ObserveDeployment(ctx context.Context, st DeploymentStatus)
}

// ProviderEventSink takes provider events; [*Service] is one.
type ProviderEventSink interface {
	// ApplyProviderEvent applies one event. An error means it was not
	// applied; neither GitHub nor GitLab delivers a failed webhook again
	// by itself, so what it would have told is learned by the
	// reconciler's next reading of the task (Config.ReconcileInterval).
	ApplyProviderEvent(ctx context.Context, ev ProviderEvent) error
}

// WebhookIntake is implemented by adapters that take their host's
// webhooks. The host program mounts the handler it returns, such as at
// /hooks/github:
//
//	mux.Handle("POST /hooks/github", gh.WebhookHandler(svc))
//
// The handler verifies each delivery (signature or token), turns it into
// ProviderEvents and passes them to sink; it answers 401 to a delivery
// that fails verification and 2xx to events it ignores.
type WebhookIntake interface {
	WebhookHandler(sink ProviderEventSink) http.Handler
}

// ProviderDelivery records a webhook delivery applied, so that a second
// delivery of it is ignored.
type ProviderDelivery struct {
	// Source and ID identify the delivery.
	Source string
	ID     string
	// ReceivedAt is when it was applied.
	ReceivedAt time.Time
}

// RefusedError is a host's or deployer's final refusal with a message meant
// for people, such as GitHub's "Pull Request is not mergeable". A failed
// ship operation's error carries the message; nothing else of the error is
// shown to clients.
type RefusedError struct {
	// Message is the host's own words.
	Message string
	// Err is the cause, for the log; it may be nil.
	Err error
}

// Error implements error.
func (e *RefusedError) Error() string {
	if e.Err != nil {
		return "refused: " + e.Message + ": " + e.Err.Error()
	}
	return "refused: " + e.Message
}

// Unwrap returns the cause.
func (e *RefusedError) Unwrap() error { return e.Err }

// DeliveryRecords returns the records that identify ev's delivery: one of
// its DeliveryID and one of its Digest (as "sha256:" and the digest, which
// no host's delivery ID looks like), each when set.
func (ev ProviderEvent) DeliveryRecords() []ProviderDelivery {
	var ds []ProviderDelivery
	if ev.DeliveryID != "" {
		ds = append(ds, ProviderDelivery{Source: ev.Source, ID: ev.DeliveryID})
	}
	if ev.Digest != "" {
		ds = append(ds, ProviderDelivery{Source: ev.Source, ID: "sha256:" + ev.Digest})
	}
	return ds
}
