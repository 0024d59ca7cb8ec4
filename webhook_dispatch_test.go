package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// claimRecorder is a Store that records the claims made through it.
type claimRecorder struct {
	lifecycle.Store

	mu     sync.Mutex
	claims []recordedClaim
}

// recordedClaim is one claim: what was asked and how many it returned.
type recordedClaim struct {
	p    lifecycle.ClaimSubscriptionsParams
	held int
}

func (c *claimRecorder) Update(ctx context.Context, fn func(lifecycle.Tx) error) error {
	return c.Store.Update(ctx, func(tx lifecycle.Tx) error { return fn(&claimRecorderTx{Tx: tx, c: c}) })
}

// claimRecorderTx records the claims of one transaction.
type claimRecorderTx struct {
	lifecycle.Tx
	c *claimRecorder
}

func (x *claimRecorderTx) ClaimSubscriptions(ctx context.Context, p lifecycle.ClaimSubscriptionsParams) ([]lifecycle.Subscription, error) {
	subs, err := x.Tx.ClaimSubscriptions(ctx, p)
	if err == nil {
		x.c.mu.Lock()
		x.c.claims = append(x.c.claims, recordedClaim{p: p, held: len(subs)})
		x.c.mu.Unlock()
	}
	return subs, err
}

// recorded returns the claims so far.
func (c *claimRecorder) recorded() []recordedClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]recordedClaim(nil), c.claims...)
}

func TestWebhookClaimBatch(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rec := &claimRecorder{}
	e := newEnv(t, rc.trust, func(c *lifecycle.Config) {
		rec.Store = c.Store
		c.Store = rec
		c.WebhookClaimBatch = 1
	})
	for range 3 {
		e.subscribe(subBody(rc.url("/hooks")))
	}
	e.start()
	// One subscription more per claim, until the Service holds all three.
	waitFor(t, func() bool {
		claims := rec.recorded()
		if n := len(claims); n == 0 || claims[n-1].held < 3 {
			e.clock.Advance(time.Second)
			return false
		}
		return true
	})
	prev := 0
	for i, c := range rec.recorded() {
		if c.p.Max != 1 || c.p.Owner == "" || !c.p.Until.Equal(c.p.Now.Add(30*time.Second)) {
			t.Errorf("claim %d asked %+v, want Max 1 and a lease of 30s", i, c.p)
		}
		if c.held > prev+1 {
			t.Errorf("claim %d took %d subscriptions more, want at most 1", i, c.held-prev)
		}
		prev = c.held
	}
}

func TestWebhookClaimBatchDefault(t *testing.T) {
	t.Parallel()
	rec := &claimRecorder{}
	e := newEnv(t, func(c *lifecycle.Config) {
		rec.Store = c.Store
		c.Store = rec
	})
	e.start()
	waitFor(t, func() bool { return len(rec.recorded()) > 0 })
	if got := rec.recorded()[0].p.Max; got != 64 {
		t.Errorf("claim Max = %d by default, want 64", got)
	}
	if _, err := lifecycle.New(lifecycle.Config{Store: e.store, BaseURL: testBase, WebhookClaimBatch: -1}); err == nil {
		t.Error("New with a negative WebhookClaimBatch succeeded")
	}
}
