package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/netguard"
	"github.com/tasklifecycle/lifecycle/internal/webhookdispatch"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// DefaultWebhookRetrySchedule returns how long attempt n+1 of a delivery
// waits after attempt n by default: 8 attempts in all, the last about 71
// hours after the first, inside the 72-hour replay window of the event
// stream, so that a receiver that gave up can resume from the stream.
func DefaultWebhookRetrySchedule() []time.Duration { return webhookdispatch.DefaultRetrySchedule() }

// Subscription limits.
const (
	minSecretLen               = 16
	maxSecretLen               = 128
	maxSubscriptionDescription = 200
	maxSubscriptionURL         = 2048
	maxFilterEntries           = 100
)

// CreateSubscriptionParams is the body of POST /event-subscriptions.
type CreateSubscriptionParams struct {
	// URL is the https URL to POST deliveries to.
	URL string `json:"url"`
	// EventTypes are the types of events to deliver; at least one.
	EventTypes []EventType `json:"eventTypes"`
	// Secret signs deliveries: 16 to 128 characters. It is never returned.
	Secret string `json:"secret"`
	// Description is an optional note of at most 200 characters.
	Description *string `json:"description"`
	// Filters optionally narrow the events delivered.
	Filters *SubscriptionFilters `json:"filters"`

	// AllowPrivateTarget lets this one subscription deliver to a host
	// that resolves to a loopback, private, link-local or otherwise
	// non-public address, when it is created and at every dial, as
	// [Config.AllowPrivateWebhookTargets] does for all: for a receiver the
	// host program itself names, such as a local one in a demo. It is
	// never taken from an HTTP request (POST /event-subscriptions refuses
	// it as an unknown member). With an IdempotencyKey, it is part of the
	// parameters that must match.
	AllowPrivateTarget bool `json:"-"`

	// IdempotencyKey, when set (8 to 128 visible ASCII characters), makes
	// the call idempotent as POST /event-subscriptions is: a retry with the
	// same key and parameters returns the subscription the first call
	// made, and the same key with other parameters is a *ConflictError.
	IdempotencyKey string `json:"-"`
}

// validate checks everything about p that needs no network; the URL's
// host is checked by [Service.CreateSubscription].
func (p *CreateSubscriptionParams) validate() error {
	var v lifecycletype.Validator
	if p.URL == "" {
		v.Add("url", "is required: the https URL that receives deliveries")
	} else if reason := checkWebhookURL(p.URL); reason != "" {
		v.Add("url", reason)
	}
	if len(p.EventTypes) == 0 {
		v.Add("eventTypes", "must list at least one of task.updated, task.reviewed, task.shipped, task.awaiting_user, task.merge_queue, task.stalled, task.ci_failed")
	}
	for i, t := range p.EventTypes {
		if !t.Valid() {
			v.Add(fmt.Sprintf("eventTypes[%d]", i), fmt.Sprintf("%q is not an event type; use task.updated, task.reviewed, task.shipped, task.awaiting_user, task.merge_queue, task.stalled or task.ci_failed", t))
		}
	}
	switch n := lifecycletype.CharCount(p.Secret); {
	case p.Secret == "":
		v.Add("secret", fmt.Sprintf("is required: %d to %d characters", minSecretLen, maxSecretLen))
	case n < minSecretLen || n > maxSecretLen:
		v.Add("secret", fmt.Sprintf("must be %d to %d characters, not %d", minSecretLen, maxSecretLen, n))
	}
	if p.Description != nil {
		v.MaxLen("description", *p.Description, maxSubscriptionDescription)
	}
	if f := p.Filters; f != nil {
		if len(f.TaskIDs) > maxFilterEntries {
			v.Add("filters.taskIds", fmt.Sprintf("at most %d task IDs", maxFilterEntries))
		}
		for i, t := range f.TaskIDs {
			if !validTaskID(t) {
				v.Add(fmt.Sprintf("filters.taskIds[%d]", i), fmt.Sprintf("%q is not a task ID (tsk_ followed by letters and digits)", t))
			}
		}
		if len(f.Projects) > maxFilterEntries {
			v.Add("filters.projects", fmt.Sprintf("at most %d projects", maxFilterEntries))
		}
		for i, pr := range f.Projects {
			if pr == "" {
				v.Add(fmt.Sprintf("filters.projects[%d]", i), "must not be empty")
			}
		}
	}
	return v.Err()
}

// checkWebhookURL returns why s is not an acceptable webhook URL, or "".
func checkWebhookURL(s string) string {
	if len(s) > maxSubscriptionURL {
		return fmt.Sprintf("at most %d characters", maxSubscriptionURL)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "":
		return "must be an absolute https URL, such as https://hooks.example.com/lifecycle"
	case u.Scheme != "https":
		return fmt.Sprintf("must use https, not %s", u.Scheme)
	case u.User != nil:
		return "must not hold credentials; authenticate deliveries with the signature instead"
	case u.Fragment != "":
		return "must not have a fragment"
	case u.Hostname() == "":
		return "must name a host"
	}
	return ""
}

// CreateSubscription creates a webhook subscription that receives the
// matching events committed from now on. The URL must be https; a host
// resolving to a loopback, private, link-local or unspecified address is
// refused unless [Config.AllowPrivateWebhookTargets] or
// p.AllowPrivateTarget is set.
func (s *Service) CreateSubscription(ctx context.Context, p CreateSubscriptionParams) (Subscription, error) {
	if err := p.validate(); err != nil {
		return Subscription{}, err
	}
	// The allowance is part of the fingerprint only when given, so that
	// the other calls match the HTTP API's.
	var fingerprint any = p
	if p.AllowPrivateTarget {
		fingerprint = struct {
			CreateSubscriptionParams
			AllowPrivateTarget bool `json:"allowPrivateTarget"`
		}{p, true}
	}
	sub, err := goIdempotentData(s, ctx, SystemActor(), subscriptionsRoute, "", p.IdempotencyKey, fingerprint,
		func(sub *Subscription) any { return subscriptionEnvelope{sub} },
		func(ctx context.Context, respond func(Tx, *Subscription) error) (Subscription, error) {
			return s.createSubscription(ctx, p, respond)
		})
	if err == nil {
		sub.AllowPrivateTarget = p.AllowPrivateTarget // a replay's record does not show it
	}
	return sub, err
}

// subscriptionEnvelope is the body of a subscription's 201.
type subscriptionEnvelope struct {
	Data *Subscription `json:"data"`
}

// createSubscription creates the subscription described by the validated
// p; respond, when set, runs in the transaction with the new record.
func (s *Service) createSubscription(ctx context.Context, p CreateSubscriptionParams, respond func(tx Tx, sub *Subscription) error) (Subscription, error) {
	u, _ := url.Parse(p.URL)
	if err := s.targets.Check(ctx, u.Hostname(), p.AllowPrivateTarget); err != nil {
		var refused *RefusedTargetError
		switch {
		case errors.As(err, &refused):
			return Subscription{}, lifecycletype.Invalid("url", refused.Reason())
		case errors.Is(err, netguard.ErrNoAddress):
			return Subscription{}, lifecycletype.Invalid("url", fmt.Sprintf("host %s does not resolve", u.Hostname()))
		}
		return Subscription{}, err
	}
	subID := id.New("whs_")
	sealed, err := s.secrets.Seal(subID, []byte(p.Secret))
	if err != nil {
		return Subscription{}, fmt.Errorf("seal webhook secret: %w", err)
	}
	// Every event committed after this read is delivered.
	bounds, err := s.store.EventBounds(ctx)
	if err != nil {
		return Subscription{}, fmt.Errorf("create subscription: %w", err)
	}
	last := bounds.Last
	sub := Subscription{
		ID:           subID,
		URL:          p.URL,
		EventTypes:   dedupe(p.EventTypes),
		Description:  p.Description,
		Filters:      SubscriptionFilters{TaskIDs: []string{}, Projects: []string{}},
		Status:       SubscriptionActive,
		CreatedAt:    s.now(),
		SealedSecret: sealed,
		Cursor:       last,

		AllowPrivateTarget: p.AllowPrivateTarget,
	}
	if p.Filters != nil {
		sub.Filters.TaskIDs = dedupe(append(sub.Filters.TaskIDs, p.Filters.TaskIDs...))
		sub.Filters.Projects = dedupe(append(sub.Filters.Projects, p.Filters.Projects...))
	}
	err = s.transact(ctx, false, func(tx Tx) error {
		if err := tx.CreateSubscription(ctx, sub); err != nil {
			return fmt.Errorf("create subscription: %w", err)
		}
		if respond != nil {
			return respond(tx, &sub)
		}
		return nil
	})
	if err != nil {
		return Subscription{}, err
	}
	s.webhooks.SubscriptionsChanged()
	return sub.Public(), nil
}

// dedupe returns s without repeated values, in first-seen order.
func dedupe[T comparable](s []T) []T {
	out := make([]T, 0, len(s))
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// validSubscriptionID reports whether s has the form of a subscription ID.
func validSubscriptionID(s string) bool { return id.Valid(s, "whs_") }

// Subscription returns the webhook subscription with the given ID.
func (s *Service) Subscription(ctx context.Context, subID string) (Subscription, error) {
	if !validSubscriptionID(subID) {
		return Subscription{}, notFound("event subscription", subID)
	}
	sub, err := s.store.Subscription(ctx, subID)
	if errors.Is(err, ErrNotFound) {
		return Subscription{}, notFound("event subscription", subID)
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("get subscription %s: %w", subID, err)
	}
	return sub.Public(), nil
}

// ListParams pages through a listing.
type ListParams struct {
	// Limit is the page size, 1 to 200. Defaults to 50.
	Limit int
	// Cursor continues a listing from the NextCursor of a previous page.
	Cursor string
}

// check validates p into v, filling in the default limit, and returns the
// position its cursor encodes.
func (p *ListParams) check(v *lifecycletype.Validator) int64 {
	switch {
	case p.Limit == 0:
		p.Limit = 50
	case p.Limit < 1 || p.Limit > 200:
		v.Add("limit", "must be between 1 and 200")
	}
	pos, ok := decodeCursor(p.Cursor)
	if !ok {
		v.Add("cursor", "is not a cursor returned by this listing")
	}
	return pos
}

// SubscriptionList is a page of subscriptions.
type SubscriptionList struct {
	// Subscriptions are in creation order.
	Subscriptions []Subscription
	// NextCursor continues the listing, or is "" on the last page.
	NextCursor string
}

// ListSubscriptions returns a page of webhook subscriptions in creation order.
func (s *Service) ListSubscriptions(ctx context.Context, p ListParams) (SubscriptionList, error) {
	var v lifecycletype.Validator
	after := p.check(&v)
	if err := v.Err(); err != nil {
		return SubscriptionList{}, err
	}
	page, err := s.store.ListSubscriptions(ctx, ListSubscriptionsParams{After: after, Limit: p.Limit})
	if err != nil {
		return SubscriptionList{}, fmt.Errorf("list subscriptions: %w", err)
	}
	for i := range page.Subscriptions {
		page.Subscriptions[i] = page.Subscriptions[i].Public()
	}
	return SubscriptionList{Subscriptions: httpapi.NonNil(page.Subscriptions), NextCursor: encodeCursor(page.Next)}, nil
}

// DeleteSubscription deletes a webhook subscription and its delivery
// history. Deliveries for it stop: an attempt under way is abandoned.
func (s *Service) DeleteSubscription(ctx context.Context, subID string) error {
	if !validSubscriptionID(subID) {
		return notFound("event subscription", subID)
	}
	err := s.transact(ctx, false, func(tx Tx) error { return tx.DeleteSubscription(ctx, subID) })
	if errors.Is(err, ErrNotFound) {
		return notFound("event subscription", subID)
	}
	if err != nil {
		return fmt.Errorf("delete subscription %s: %w", subID, err)
	}
	s.webhooks.StopWorker(ctx, subID)
	return nil
}

// DeliveryList is a page of delivery attempts.
type DeliveryList struct {
	// Deliveries are newest first.
	Deliveries []Delivery
	// NextCursor continues the listing, or is "" on the last page.
	NextCursor string
}

// Deliveries returns a page of the delivery attempts of a subscription,
// newest first.
func (s *Service) Deliveries(ctx context.Context, subID string, p ListParams) (DeliveryList, error) {
	var v lifecycletype.Validator
	before := p.check(&v)
	if err := v.Err(); err != nil {
		return DeliveryList{}, err
	}
	if _, err := s.Subscription(ctx, subID); err != nil {
		return DeliveryList{}, err
	}
	page, err := s.store.Deliveries(ctx, DeliveryFilter{SubscriptionID: subID, Before: before, Limit: p.Limit})
	if err != nil {
		return DeliveryList{}, fmt.Errorf("list deliveries of %s: %w", subID, err)
	}
	return DeliveryList{Deliveries: httpapi.NonNil(page.Deliveries), NextCursor: encodeCursor(page.Next)}, nil
}

// subscriptionsRoute is the route of POST /event-subscriptions, part of
// its idempotency scope.
const subscriptionsRoute = "POST /event-subscriptions"

func (s *Service) handleCreateSubscription(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params CreateSubscriptionParams
	req := keyedRequest{route: subscriptionsRoute, status: http.StatusCreated, body: &params, check: params.validate}
	return s.serveIdempotent(w, r, p, req,
		func(ctx context.Context, _ string, respond func(Tx, any) error) error {
			_, err := s.createSubscription(ctx, params, func(tx Tx, sub *Subscription) error {
				return respond(tx, subscriptionEnvelope{sub})
			})
			return err
		})
}

func (s *Service) handleListSubscriptions(w http.ResponseWriter, r *http.Request, p *Principal) error {
	params, err := listParams(r)
	if err != nil {
		return err
	}
	list, err := s.ListSubscriptions(r.Context(), params)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Data       []Subscription `json:"data"`
		NextCursor *string        `json:"nextCursor"`
	}{list.Subscriptions, nullIfEmpty(list.NextCursor)})
	return nil
}

func (s *Service) handleGetSubscription(w http.ResponseWriter, r *http.Request, p *Principal) error {
	sub, err := s.Subscription(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	httpapi.WriteData(w, http.StatusOK, sub)
	return nil
}

func (s *Service) handleDeleteSubscription(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if err := s.DeleteSubscription(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleListDeliveries(w http.ResponseWriter, r *http.Request, p *Principal) error {
	params, err := listParams(r)
	if err != nil {
		return err
	}
	list, err := s.Deliveries(r.Context(), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Data       []Delivery `json:"data"`
		NextCursor *string    `json:"nextCursor"`
	}{list.Deliveries, nullIfEmpty(list.NextCursor)})
	return nil
}

// listParams reads the limit and cursor query parameters of a listing.
func listParams(r *http.Request) (ListParams, error) {
	q := r.URL.Query()
	p := ListParams{Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return p, lifecycletype.Invalid("limit", "must be an integer between 1 and 200")
		}
		if n == 0 {
			n = -1 // an explicit 0 is out of range, not the default
		}
		p.Limit = n
	}
	return p, nil
}

// nullIfEmpty returns nil for "", so that JSON says null.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
