package lifecycle_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// A subscription the host program allows to reach a private address
// (CreateSubscriptionParams.AllowPrivateTarget) is delivered to it, at
// creation and at every dial; every other subscription is still refused,
// even one to the same host and port, whose connections are not shared
// with it. The allowance cannot be given over HTTP, and the Store keeps
// it.
func TestPrivateTargetAllowedForOneSubscription(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	res := &flipResolver{addr: "93.184.216.34"}
	e := newEnv(t, rc.trust, func(c *lifecycle.Config) {
		c.AllowPrivateWebhookTargets = false
		c.WebhookResolver = res
	})
	e.Start()
	port := rc.Server().Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	// example.com is a name the receiver's certificate holds.
	url := func(path string) string { return fmt.Sprintf("https://example.com:%d%s", port, path) }
	types := []lifecycle.EventType{lifecycle.EventTaskUpdated}

	// Strict: created while the name resolved to a public address.
	strict := e.Subscribe(subBody(url("/strict")))["id"].(string)
	res.set("127.0.0.1")
	allowed, err := e.Svc.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{
		URL: url("/allowed"), EventTypes: types, Secret: hookSecret, AllowPrivateTarget: true, IdempotencyKey: "allowed-1",
	})
	if err != nil || !allowed.AllowPrivateTarget {
		t.Fatalf("CreateSubscription(AllowPrivateTarget) = %+v, %v; want it created, allowed", allowed, err)
	}
	again, err := e.Svc.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{
		URL: url("/allowed"), EventTypes: types, Secret: hookSecret, AllowPrivateTarget: true, IdempotencyKey: "allowed-1",
	})
	if err != nil || again.ID != allowed.ID || !again.AllowPrivateTarget {
		t.Errorf("the same call again = %+v, %v; want the subscription %s replayed, allowed", again, err, allowed.ID)
	}
	_, err = e.Svc.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{
		URL: url("/allowed"), EventTypes: types, Secret: hookSecret, IdempotencyKey: "allowed-1",
	})
	if !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("the same key without the allowance: error %v, want a conflict", err)
	}
	_, err = e.Svc.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{URL: url("/other"), EventTypes: types, Secret: hookSecret})
	if !errors.Is(err, lifecycle.ErrValidation) || !strings.Contains(err.Error(), "private or reserved address") {
		t.Errorf("another subscription to the private address: error %v, want it refused", err)
	}
	// Over HTTP the allowance is an unknown member.
	body := subBody(url("/http"))
	body["allowPrivateTarget"] = true
	if rec := e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions", Key: e.Admin, Body: body,
		Header: http.Header{"Idempotency-Key": {"http-allow-1"}}}); rec.Code != http.StatusBadRequest {
		t.Errorf("allowPrivateTarget over HTTP: %d %s, want 400", rec.Code, rec.Body)
	}
	for _, get := range []func() (lifecycle.Subscription, error){
		func() (lifecycle.Subscription, error) { return e.Svc.Subscription(t.Context(), allowed.ID) },
		func() (lifecycle.Subscription, error) { return e.Store.Subscription(t.Context(), allowed.ID) },
	} {
		if got, err := get(); err != nil || !got.AllowPrivateTarget {
			t.Errorf("subscription read back: AllowPrivateTarget %v, %v; want true", got.AllowPrivateTarget, err)
		}
	}
	if rec := e.Do(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + allowed.ID, Key: e.Admin}); strings.Contains(rec.Body.String(), "rivate") {
		t.Errorf("the HTTP record shows the allowance: %s", rec.Body)
	}

	// Both are due a delivery of the same event, to the same host and port.
	e.CreateTask(apitest.TaskBody("ENG-1"))
	if d := rc.next(); d.path != "/allowed" {
		t.Errorf("delivery to %s, want /allowed", d.path)
	}
	list := e.WaitDeliveries(strict, 1)
	if list[0]["status"] != "pending" || !strings.Contains(fmt.Sprint(list[0]["error"]), "resolves to a private or reserved address") {
		t.Errorf("the strict subscription's attempt = %v, want pending, refused at dial", list[0])
	}
	rc.quiet(50 * time.Millisecond)
}
