package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// This file holds what an operator does to a subscription's deliveries:
// replay its events from a sequence, retry a delivery now, and enable it
// again after its receiver disabled it. Each is one Store transaction that
// bumps the subscription's Revision; the dispatcher holding the
// subscription sees the new revision at its next claim (at once in this
// process, and through a Notifier Store in the others) and looks again at
// its cursor and pending attempts.

// ReplayParams asks for a subscription's events to be delivered again. Its
// JSON form is the body of POST /event-subscriptions/{id}/replay.
type ReplayParams struct {
	// FromSequence is where the replay starts: the events with a greater
	// sequence that the subscription keeps are delivered again, in
	// sequence order, each as a new delivery (a new delivery ID, the same
	// event ID). 0 replays every stored event. The events after it must
	// all still be stored (they are kept [Config.EventRetention], 72 hours
	// by default), and it must not be after the last event.
	FromSequence int64 `json:"fromSequence"`

	// IdempotencyKey, when set (8 to 128 visible ASCII characters), makes
	// the call idempotent as the HTTP endpoint is: a retry with the same
	// key and parameters returns the first answer without replaying again.
	IdempotencyKey string `json:"-"`
}

// Replay is the answer to a replay request.
type Replay struct {
	// SubscriptionID is the subscription whose events are replayed.
	SubscriptionID string `json:"subscriptionId"`
	// FromSequence is where the replay starts, as asked.
	FromSequence int64 `json:"fromSequence"`
	// ThroughSequence is the last event committed when the replay was
	// accepted: the events after FromSequence through it are delivered
	// again; those after it are delivered as any new event is.
	ThroughSequence int64 `json:"throughSequence"`
}

// replayBody is the HTTP body of a replay, whose fromSequence is required.
type replayBody struct {
	FromSequence *int64 `json:"fromSequence"`
}

func (b *replayBody) validate() error {
	switch {
	case b.FromSequence == nil:
		return lifecycletype.Invalid("fromSequence", "is required: the sequence after which events are delivered again (0 for every stored event)")
	case *b.FromSequence < 0:
		return lifecycletype.Invalid("fromSequence", "must be 0 or more")
	}
	return nil
}

// replayRoute is the route of POST /event-subscriptions/{id}/replay, part
// of its idempotency scope.
const replayRoute = "POST /event-subscriptions/{id}/replay"

// ReplaySubscription delivers a subscription's events again from a
// sequence (see [ReplayParams]). It returns an error matching ErrNotFound
// for an unknown subscription, ErrValidation for a sequence after the last
// event, and ErrCursorExpired when events after the sequence were pruned.
// A disabled subscription is replayed once it is enabled again.
func (s *Service) ReplaySubscription(ctx context.Context, subID string, p ReplayParams) (Replay, error) {
	body := replayBody{FromSequence: &p.FromSequence}
	if err := body.validate(); err != nil {
		return Replay{}, err
	}
	return goIdempotentData(s, ctx, SystemActor(), replayRoute, subID, p.IdempotencyKey, body,
		func(r *Replay) any { return replayEnvelope{r} },
		func(ctx context.Context, respond func(Tx, *Replay) error) (Replay, error) {
			return s.replay(ctx, subID, p.FromSequence, respond)
		})
}

// replayEnvelope is the body of a replay's 202.
type replayEnvelope struct {
	Data *Replay `json:"data"`
}

// replay marks the subscription rewound to from, so that its dispatcher
// reads on from there (or from where it was, if earlier), and moves its
// stored cursor back to from at most, for a dispatcher that starts afresh;
// respond, when set, runs in the transaction.
func (s *Service) replay(ctx context.Context, subID string, from int64, respond func(tx Tx, r *Replay) error) (Replay, error) {
	if _, err := s.Subscription(ctx, subID); err != nil {
		return Replay{}, err // an unknown subscription is 404 whatever the sequence
	}
	bounds, err := s.store.EventBounds(ctx)
	if err != nil {
		return Replay{}, fmt.Errorf("replay: %w", err)
	}
	last, pruned := bounds.Last, bounds.PrunedThrough
	if from > last {
		return Replay{}, lifecycletype.Invalid("fromSequence", fmt.Sprintf("is after the last event, whose sequence is %d", last))
	}
	if from < pruned {
		return Replay{}, fmt.Errorf("events after sequence %d, through %d, were pruned (events are kept %d hours): replay from %d or later: %w",
			from, pruned, int64(s.cfg.EventRetention/time.Hour), pruned, ErrCursorExpired)
	}
	out := Replay{SubscriptionID: subID, FromSequence: from, ThroughSequence: last}
	err = s.transact(ctx, false, func(tx Tx) error {
		sub, err := subscriptionIn(ctx, tx, subID)
		if err != nil {
			return err
		}
		if !sub.Rewound || from < sub.RewindTo {
			sub.RewindTo = from
		}
		sub.Cursor = min(sub.Cursor, from) // where a dispatcher that starts afresh begins
		sub.Rewound = true
		sub.Revision++
		if err := tx.UpdateSubscription(ctx, sub); err != nil {
			return fmt.Errorf("rewind subscription %s: %w", subID, err)
		}
		if respond != nil {
			return respond(tx, &out)
		}
		return nil
	})
	if err != nil {
		return Replay{}, err
	}
	s.webhooks.SubscriptionsChanged()
	s.log.InfoContext(ctx, "webhooks: subscription replayed", "subscription", subID, "from", from, "through", last)
	return out, nil
}

// subscriptionIn reads a subscription in tx, with the API's not-found
// error for an unknown one.
func subscriptionIn(ctx context.Context, tx Tx, subID string) (Subscription, error) {
	sub, err := tx.Subscription(ctx, subID)
	if errors.Is(err, ErrNotFound) {
		return Subscription{}, notFound("event subscription", subID)
	}
	return sub, err
}

// validDeliveryID reports whether s has the form of a delivery attempt's ID.
func validDeliveryID(s string) bool { return id.Valid(s, "dlv_") }

// RetryDelivery makes the next attempt at a delivery now: a pending one
// is not left to wait for its schedule, and a failed one is attempted once
// more, with the body it was first sent with. The automatic schedule goes
// on after a failed retry while fewer than 8 attempts were made; each
// retry asked for beyond that is one attempt. Only the last attempt of a
// delivery's chain can be retried: a failed attempt that another
// followed (its NextAttemptAt is set) cannot.
//
// It returns the attempt, now pending and due, or an error matching
// ErrNotFound (no such attempt of that subscription), ErrConflict (it
// succeeded, another attempt followed it, or the subscription is
// disabled), or ErrCursorExpired (a failed attempt whose event was pruned:
// its body is gone).
func (s *Service) RetryDelivery(ctx context.Context, subID, deliveryID string) (Delivery, error) {
	if !validSubscriptionID(subID) {
		return Delivery{}, notFound("event subscription", subID)
	}
	if !validDeliveryID(deliveryID) {
		return Delivery{}, notFound("delivery", deliveryID)
	}
	// Everything is decided in one transaction, on the attempt read for
	// update: another retry, or the dispatcher recording the next attempt,
	// commits before or after it, never between the check and the change.
	// A failed attempt keeps no body: the first pass finds which event to
	// encode again, the second uses it.
	var (
		d    Delivery
		body []byte
	)
	for {
		var needEvent string
		err := s.transact(ctx, false, func(tx Tx) error {
			needEvent = ""
			sub, err := subscriptionIn(ctx, tx, subID)
			if err != nil {
				return err
			}
			if sub.Status != SubscriptionActive {
				return &ConflictError{Reason: "subscription_disabled",
					Message: fmt.Sprintf("subscription %s is disabled; enable it (POST /event-subscriptions/%s/enable) before retrying its deliveries", subID, subID)}
			}
			d, err = tx.Delivery(ctx, deliveryID)
			if errors.Is(err, ErrNotFound) || (err == nil && d.SubscriptionID != subID) {
				return notFound("delivery", deliveryID)
			}
			if err != nil {
				return err
			}
			switch {
			case d.Status == DeliverySucceeded:
				return &ConflictError{Reason: "delivery_succeeded", Message: fmt.Sprintf("delivery %s succeeded; there is nothing to retry", deliveryID)}
			case d.Status == DeliveryFailed && d.NextAttemptAt != nil:
				return errSuperseded
			case d.Status == DeliveryFailed && body == nil:
				needEvent = d.EventID
				return errNeedBody
			case d.Status == DeliveryFailed:
				d.Status, d.Body = DeliveryPending, body
			}
			now := s.now()
			d.NextAttemptAt = &now
			if err := tx.UpdateDelivery(ctx, d); err != nil {
				return fmt.Errorf("retry delivery %s: %w", deliveryID, err)
			}
			sub.Revision++
			return tx.UpdateSubscription(ctx, sub)
		})
		switch {
		case errors.Is(err, errNeedBody):
			evs, err := s.store.Events(ctx, EventFilter{ID: needEvent, Limit: 1})
			if err != nil {
				return Delivery{}, fmt.Errorf("retry delivery %s: %w", deliveryID, err)
			}
			if len(evs) == 0 {
				return Delivery{}, fmt.Errorf("event %s of delivery %s is no longer stored (events are kept %d hours), so it cannot be sent again: %w",
					needEvent, deliveryID, int64(s.cfg.EventRetention/time.Hour), ErrCursorExpired)
			}
			body = broker.NewEvent(&evs[0], s.log).Body
			continue
		case errors.Is(err, errSuperseded):
			return Delivery{}, s.superseded(ctx, d)
		case err != nil:
			return Delivery{}, err
		}
		break
	}
	s.webhooks.SubscriptionsChanged()
	s.log.InfoContext(ctx, "webhooks: delivery retried", "subscription", subID, "delivery", deliveryID, "attempt", d.Attempt+1)
	d.Body = nil
	return d, nil
}

// errSuperseded and errNeedBody end a retry's transaction without a
// change: the attempt was followed by another, or its event must be read
// first.
var (
	errSuperseded = errors.New("the attempt was followed by another")
	errNeedBody   = errors.New("the event is read first")
)

// superseded returns the conflict of a retry of d, an attempt another
// followed, naming the newest attempt at its event.
func (s *Service) superseded(ctx context.Context, d Delivery) error {
	msg := fmt.Sprintf("delivery %s (attempt %d) was followed by another attempt; retry the last attempt of its chain", d.ID, d.Attempt)
	if page, err := s.store.Deliveries(ctx, DeliveryFilter{SubscriptionID: d.SubscriptionID, EventID: d.EventID, Limit: 1}); err == nil && len(page.Deliveries) > 0 {
		newest := page.Deliveries[0]
		msg += fmt.Sprintf(" (the newest attempt at event %s is %s, attempt %d, %s)", d.EventID, newest.ID, newest.Attempt, newest.Status)
	}
	return &ConflictError{Reason: "delivery_superseded", Message: msg}
}

// EnableSubscription makes a disabled subscription active again: delivery
// resumes after the last event whose first attempt was recorded before it
// was disabled, so the events committed meanwhile that are still stored
// are delivered (older ones were pruned, and are logged as missed). The
// attempts failed by the disabling stay failed; [Service.RetryDelivery]
// retries them. Enabling an active subscription changes nothing. It
// returns an error matching ErrNotFound for an unknown subscription.
func (s *Service) EnableSubscription(ctx context.Context, subID string) (Subscription, error) {
	if !validSubscriptionID(subID) {
		return Subscription{}, notFound("event subscription", subID)
	}
	var sub Subscription
	changed := false
	err := s.transact(ctx, false, func(tx Tx) error {
		var err error
		sub, err = subscriptionIn(ctx, tx, subID)
		if err != nil || sub.Status == SubscriptionActive {
			return err
		}
		// Any dispatcher may take it up at once.
		sub.Status, sub.LeaseOwner, sub.LeaseUntil = SubscriptionActive, "", time.Time{}
		sub.Revision++
		changed = true
		return tx.UpdateSubscription(ctx, sub)
	})
	if err != nil {
		return Subscription{}, err
	}
	if changed {
		s.webhooks.SubscriptionsChanged()
		s.log.InfoContext(ctx, "webhooks: subscription enabled", "subscription", subID)
	}
	return sub.Public(), nil
}

func (s *Service) handleReplay(w http.ResponseWriter, r *http.Request, p *Principal) error {
	subID := r.PathValue("id")
	var body replayBody
	req := keyedRequest{route: replayRoute, resourceID: subID, status: http.StatusAccepted, body: &body, check: body.validate}
	return s.serveIdempotent(w, r, p, req,
		func(ctx context.Context, _ string, respond func(Tx, any) error) error {
			_, err := s.replay(ctx, subID, *body.FromSequence, func(tx Tx, rp *Replay) error {
				return respond(tx, replayEnvelope{rp})
			})
			return err
		})
}

func (s *Service) handleRetryDelivery(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if err := httpapi.DecodeJSON(w, r, &struct{}{}, true); err != nil {
		return err
	}
	d, err := s.RetryDelivery(httpapi.RequestContext(r), r.PathValue("id"), r.PathValue("deliveryId"))
	if err != nil {
		return err
	}
	httpapi.WriteData(w, http.StatusAccepted, d)
	return nil
}

func (s *Service) handleEnableSubscription(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if err := httpapi.DecodeJSON(w, r, &struct{}{}, true); err != nil {
		return err
	}
	sub, err := s.EnableSubscription(httpapi.RequestContext(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	httpapi.WriteData(w, http.StatusOK, sub)
	return nil
}
