package webhookdispatch

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/cursorloop"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/leasepool"
	"github.com/tasklifecycle/lifecycle/internal/netguard"
	"github.com/tasklifecycle/lifecycle/internal/secretbox"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/internal/webhooksend"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// DefaultRetrySchedule returns how long attempt n+1 of a delivery waits
// after attempt n by default: 8 attempts in all, the last about 71 hours
// after the first, inside the 72-hour replay window of the event stream,
// so that a receiver that gave up can resume from the stream.
func DefaultRetrySchedule() []time.Duration {
	return []time.Duration{
		10 * time.Second, time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 40 * time.Hour,
	}
}

// MaxAttempts is the contract's limit on the attempts at one delivery:
// a RetrySchedule has at most MaxAttempts-1 delays.
const MaxAttempts = 8

// workerBatch is the most events a subscription's worker takes at once.
const workerBatch = 256

// recordDelay is the longest a worker keeps successful first
// attempts before recording them (wall-clock time).
const recordDelay = 50 * time.Millisecond

// storeRetry is how long a worker waits after its Store failed.
const storeRetry = time.Second

// cursorLag is how many events a worker may read past, none of
// which its subscription keeps, before it stores its cursor; and
// cursorDelay the longest it keeps such a cursor unstored (by the
// Service's clock). A subscription whose filters keep nothing thus writes
// its cursor now and then rather than never, and a restart neither reads
// everything again nor, once those events are pruned, warns that they
// were not delivered.
const (
	cursorLag   = workerBatch
	cursorDelay = 5 * time.Second
)

// Errors that end a subscription's worker.
var (
	errSubscriptionGone = errors.New("the subscription was deleted")
	errLeaseLost        = errors.New("another dispatcher holds the subscription, or it is disabled")
)

// Dispatcher delivers webhooks. It leases the active subscriptions from
// the Store, so that one dispatcher among the processes sharing a Store
// delivers for each, and runs a worker per subscription it holds.
//
// A worker reads the events after its subscription's cursor, from the
// stream broker's ring while it keeps up and from the Store when it falls
// behind, and delivers those its subscription keeps, with the retries that
// have come due, at most ConcurrencyPerSubscription at once and at
// most Concurrency across all workers. Then, in one transaction, it
// records every attempt and moves the cursor past the events it read. An
// event is therefore delivered at least once, whatever stops the process:
// until the transaction commits, the cursor stays before it and the next
// worker delivers it again.
type Dispatcher struct {
	cfg Config
	// client delivers; privateClient delivers for the subscriptions
	// allowed to reach private addresses, through connections of its
	// own, so that no other subscription reuses one of them.
	client, privateClient *http.Client
	global                chan struct{} // semaphore of attempts in flight
	// pool leases the subscriptions and runs their workers.
	pool *leasepool.Pool[lifecycletype.Subscription, *subWorker]
	// tel holds the attribute sets of the attempts' measures, and the
	// backlog and lag gauges while the dispatcher runs.
	tel *telemetry.Deliveries
}

// Reader is what a Dispatcher reads from the Store outside transactions:
// the pending attempts of a subscription, and the events its worker fell
// behind the broker's ring on.
type Reader interface {
	Deliveries(ctx context.Context, f lifecycletype.DeliveryFilter) (lifecycletype.DeliveryPage, error)
	Events(ctx context.Context, f lifecycletype.EventFilter) ([]lifecycletype.Event, error)
}

// Config is what a Dispatcher is built from: its dependencies, and the
// lifecycle.Config fields of webhook delivery.
type Config struct {
	// Owner is the holder of the subscription leases:
	// lifecycle.Config.InstanceID, so that a restarted Service takes its
	// subscriptions back at once.
	Owner string
	// Store reads pending attempts and events; Update runs a transaction
	// that need not wait for the disk (the Service's updateRelaxed).
	Store  Reader
	Update func(ctx context.Context, fn func(tx lifecycletype.Tx) error) error
	Clock  lifecycletype.Clock
	Log    *slog.Logger
	// Broker feeds the workers the events from its ring.
	Broker *broker.Broker
	// Secrets opens the subscriptions' sealed secrets.
	Secrets *secretbox.Box
	// Targets checks the receivers' addresses at every dial (see
	// NewTargetGuard).
	Targets *netguard.Guard
	// Tel is the Service's telemetry.
	Tel *telemetry.Telemetry

	// The lifecycle.Config fields of webhook delivery, their defaults
	// filled in: TLSConfig is its WebhookTLSConfig, Concurrency its
	// WebhookConcurrency, and so on; MetricIdentifiers is its
	// MetricIdentifiers.
	TLSConfig                  *tls.Config
	Concurrency                int
	ConcurrencyPerSubscription int
	Timeout                    time.Duration
	PollInterval               time.Duration
	Lease                      time.Duration
	ClaimBatch                 int
	RetrySchedule              []time.Duration
	RetryJitter                float64
	MetricIdentifiers          bool
}

// New returns a Dispatcher; it does nothing until Run.
func New(cfg Config) *Dispatcher {
	d := &Dispatcher{
		cfg:    cfg,
		client: newWebhookClient(&cfg, cfg.Targets),
		global: make(chan struct{}, cfg.Concurrency),
		tel:    cfg.Tel.Deliveries(),
	}
	d.privateClient = d.client
	if !cfg.Targets.AllowPrivate {
		d.privateClient = newWebhookClient(&cfg, NewTargetGuard(true, cfg.Targets.Resolver, cfg.Log))
	}
	d.pool = leasepool.New(leasepool.Config[lifecycletype.Subscription, *subWorker]{
		Clock: cfg.Clock, Poll: cfg.PollInterval, Lease: cfg.Lease,
		Claim: d.claim,
		Key:   func(sub *lifecycletype.Subscription) string { return sub.ID },
		Start: d.startWorker,
		Run:   (*subWorker).run,
		Held: func(w *subWorker, sub *lifecycletype.Subscription) {
			if w.notified.Swap(sub.Revision) != sub.Revision {
				w.poke() // an operator replayed or retried
			}
		},
		Release: d.release,
	})
	return d
}

// newWebhookClient returns a client that delivers webhooks, dialing
// through guard.
func newWebhookClient(cfg *Config, guard *netguard.Guard) *http.Client {
	return webhooksend.NewClient(webhooksend.ClientConfig{Dial: guard.DialContext, TLS: cfg.TLSConfig,
		Concurrency: cfg.Concurrency, Timeout: cfg.Timeout})
}

// Counts returns how many subscription workers the Dispatcher runs and
// how many deleted subscriptions it remembers, for tests.
func (d *Dispatcher) Counts() (workers, deleted int) { return d.pool.Counts() }

// maxAttempts is the most attempts at one delivery.
func (d *Dispatcher) maxAttempts() int { return len(d.cfg.RetrySchedule) + 1 }

// SubscriptionsChanged makes the dispatcher claim subscriptions again soon.
func (d *Dispatcher) SubscriptionsChanged() { d.pool.Wake() }

// Run claims subscriptions every poll interval, or when they changed, and
// keeps a worker running for each one held, until ctx is done. It then
// stops the workers and gives the leases up. The gauges of the
// subscriptions it delivers are observed meanwhile.
func (d *Dispatcher) Run(ctx context.Context) {
	if reg := d.registerGauges(); reg != nil {
		defer reg.Unregister()
	}
	d.pool.Run(ctx)
}

// claim renews this dispatcher's leases and takes up expired ones, at most
// ClaimBatch at a time, and returns the subscriptions held.
func (d *Dispatcher) claim(ctx context.Context, now time.Time) ([]lifecycletype.Subscription, error) {
	c := &d.cfg
	var held []lifecycletype.Subscription
	err := c.Update(ctx, func(tx lifecycletype.Tx) error {
		var err error
		held, err = tx.ClaimSubscriptions(ctx, lifecycletype.ClaimSubscriptionsParams{
			Owner: d.cfg.Owner, Now: now, Until: now.Add(c.Lease), Max: c.ClaimBatch,
		})
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Error("webhooks: claim subscriptions", "err", err)
		}
		return nil, err
	}
	if len(held) > 0 {
		// Workers read the events from the stream broker's ring.
		if err := c.Broker.Start(ctx); err != nil {
			if ctx.Err() == nil {
				c.Log.Error("webhooks: start reading events", "err", err)
			}
			return nil, err
		}
	}
	return held, nil
}

// startWorker makes the worker of a subscription newly held, unless its
// deliveries cannot be signed.
func (d *Dispatcher) startWorker(ctx context.Context, sub *lifecycletype.Subscription) (*subWorker, bool) {
	secret, err := d.cfg.Secrets.Open(sub.ID, sub.SealedSecret)
	if err != nil {
		d.cfg.Log.Error("webhooks: cannot sign deliveries of the subscription", "subscription", sub.ID, "err", err)
		return nil, false
	}
	return newSubWorker(ctx, d, *sub, secret), true
}

// StopWorker stops the worker of a deleted subscription, if there is one,
// and waits until it has stopped or ctx is done.
func (d *Dispatcher) StopWorker(ctx context.Context, subID string) { d.pool.Stop(ctx, subID) }

// release gives the leases of held up, once their workers have stopped,
// so that another process may deliver at once.
func (d *Dispatcher) release(held []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := d.cfg.Update(ctx, func(tx lifecycletype.Tx) error {
		for _, subID := range held {
			sub, err := tx.Subscription(ctx, subID)
			if errors.Is(err, lifecycletype.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if sub.LeaseOwner == d.cfg.Owner {
				sub.LeaseOwner, sub.LeaseUntil = "", time.Time{}
				if err := tx.UpdateSubscription(ctx, sub); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		d.cfg.Log.Warn("webhooks: give leases up; they expire by themselves", "err", err)
	}
}

// subWorker delivers the events of one subscription.
type subWorker struct {
	d      *Dispatcher
	sub    lifecycletype.Subscription
	secret []byte
	sem    chan struct{}   // attempts in flight for this subscription
	ctx    context.Context // ends when the worker is stopped
	keep   func(*broker.Event) bool

	// notified is the subscription's Revision as its dispatcher's claims
	// last read it, and pokeC (capacity 1) tells the worker it changed.
	notified atomic.Int64
	pokeC    chan struct{}
	// rev is the Revision the worker last acted on: a rewind made after
	// it moves the worker back to the rewind's sequence (see record).
	// Only the worker's goroutine uses it, as it does the retries due and
	// events read last (due, buf) and the attempts not yet recorded.
	rev        int64
	due        []lifecycletype.Delivery
	buf        []broker.Event
	unrecorded []*attempt

	// host is the receiver's host name, for server.address of the span;
	// receiver the attribute sets of http.client.request.duration, the
	// dispatcher's (with no server.address) unless
	// Config.MetricIdentifiers.
	host     string
	receiver *telemetry.Receiver
	// gauge is what the backlog and lag gauges read.
	gauge telemetry.Backlog
}

// newSubWorker returns the worker of sub; it stops when ctx ends.
func newSubWorker(ctx context.Context, d *Dispatcher, sub lifecycletype.Subscription, secret []byte) *subWorker {
	w := &subWorker{
		d:      d,
		sub:    sub,
		secret: secret,
		sem:    make(chan struct{}, d.cfg.ConcurrencyPerSubscription),
		ctx:    ctx,
		pokeC:  make(chan struct{}, 1),
		rev:    sub.Revision,
		host:   receiverHost(sub.URL),
	}
	w.receiver = d.tel.Receiver(w.host, d.cfg.MetricIdentifiers)
	w.gauge.ReadsAfter(sub.Cursor)
	w.notified.Store(sub.Revision)
	w.keep = func(e *broker.Event) bool { return w.sub.Keeps(e.Type, e.TaskID, e.Project) }
	return w
}

// poke tells the worker that an operator changed its subscription: it
// reads its pending attempts again, and its cursor when rewound.
func (w *subWorker) poke() {
	select {
	case w.pokeC <- struct{}{}:
	default:
	}
}

// attempt is one attempt at delivering an event, and its outcome.
type attempt struct {
	eventID string
	seq     int64
	typ     lifecycletype.EventType
	body    []byte
	n       int                     // the attempt's number, from 1
	prev    *lifecycletype.Delivery // the pending attempt this one retries, or nil

	id         string // dlv_
	at         time.Time
	status     int    // the receiver's HTTP status, or 0
	err        string // why it failed, or ""
	retryAfter time.Duration
}

// run delivers until the worker is cancelled, its subscription is deleted
// or disabled, or another dispatcher takes it over (see
// internal/cursorloop for when attempts are recorded).
//
// Attempts that succeeded at first try are recorded together, at the
// latest recordDelay after the first of them or once a batch's
// worth has gathered, so that a busy subscription commits a transaction
// per batch rather than per wake-up; anything else (a failure, a retry) is
// recorded before the worker goes on. Until recorded, the cursor stays
// before those events: if the process dies, they are delivered again.
//
// Only this worker and operators (see the Service's replay and retry)
// add pending attempts to its subscription, and operators poke it when
// they do; so it knows when the next is due and reads them from the Store
// only then. A worker
// that starts on a rewound subscription records before it delivers
// anything, so that the rewind it started at is not applied again at its
// first record.
func (w *subWorker) run() {
	log := w.d.cfg.Log.With("subscription", w.sub.ID)
	ends := func(err error) bool { return errors.Is(err, errSubscriptionGone) || errors.Is(err, errLeaseLost) }
	cursorloop.Run(w.ctx, cursorloop.Config{
		Clock: w.d.cfg.Clock, Cursor: w.sub.Cursor, Poked: w.sub.Rewound, Poke: w.pokeC,
		Batch: workerBatch, RecordDelay: recordDelay, CursorLag: cursorLag, CursorDelay: cursorDelay,
		RetryWait: storeRetry, StopTimeout: 5 * time.Second, Ends: ends,
		Stopped: func(reason error) { log.Info("webhooks: stop delivering", "reason", reason) },
		Failed: func(step cursorloop.Failure, err error) {
			switch step {
			case cursorloop.Round:
				log.Error("webhooks: deliver", "err", err)
			case cursorloop.Flush:
				log.Error("webhooks: record deliveries and the cursor", "err", err)
			case cursorloop.FinalDeliveries:
				log.Warn("webhooks: record deliveries while stopping; they will be delivered again", "err", err)
			case cursorloop.FinalCursor:
				log.Warn("webhooks: store the cursor while stopping; the events after it will be read again", "err", err)
			}
		},
	}, (*subLoop)(w))
}

// subLoop is a subWorker as its cursorloop.Worker.
type subLoop subWorker

// Due implements cursorloop.Worker.
func (l *subLoop) Due(ctx context.Context, now time.Time) (int, time.Time, error) {
	due, next, err := (*subWorker)(l).dueRetries(now)
	l.due = due
	return len(due), next, err
}

// Read implements cursorloop.Worker.
func (l *subLoop) Read(ctx context.Context, pos int64) (int, int64, <-chan struct{}, error) {
	evs, next, changed, err := (*subWorker)(l).read(pos, l.buf[:0])
	l.buf = evs
	return len(evs), next, changed, err
}

// Deliver implements cursorloop.Worker.
func (l *subLoop) Deliver(ctx context.Context) (int, bool) {
	attempts := (*subWorker)(l).deliver(l.due, l.buf)
	l.due = nil
	l.unrecorded = append(l.unrecorded, attempts...)
	return len(attempts), slices.ContainsFunc(attempts, (*attempt).failed)
}

// Record implements cursorloop.Worker.
func (l *subLoop) Record(ctx context.Context, pos int64) (time.Time, *int64, error) {
	retryAt, rewound, err := (*subWorker)(l).record(ctx, l.unrecorded, pos)
	if err == nil {
		clear(l.unrecorded)
		l.unrecorded = l.unrecorded[:0]
	}
	if rewound != nil {
		l.gauge.ReadsAfter(*rewound)
	}
	return retryAt, rewound, err
}

// failed reports whether the attempt failed (or never started).
func (a *attempt) failed() bool { return a.id == "" || a.err != "" }

// dueRetries returns the pending attempts due at now, and when the next
// one not yet due is, or the zero time.
func (w *subWorker) dueRetries(now time.Time) ([]lifecycletype.Delivery, time.Time, error) {
	page, err := w.d.cfg.Store.Deliveries(w.ctx, lifecycletype.DeliveryFilter{SubscriptionID: w.sub.ID, Pending: true, Limit: workerBatch})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read pending deliveries: %w", err)
	}
	pending := page.Deliveries
	telemetry.PendingRead(&w.gauge, pending, deliveryIdent, len(pending) < workerBatch)
	for i := range pending {
		if at := pending[i].NextAttemptAt; at != nil && at.After(now) {
			return pending[:i], at.Time, nil
		}
	}
	return pending, time.Time{}, nil
}

// read returns the events after pos that the subscription keeps, the
// sequence read through, and a channel closed when more events arrive (nil
// when more may be waiting in the Store).
func (w *subWorker) read(pos int64, dst []broker.Event) ([]broker.Event, int64, <-chan struct{}, error) {
	c := &w.d.cfg
	evs, next, changed, ok := c.Broker.Events(pos, w.keep, dst, workerBatch)
	if ok {
		w.gauge.ReadEvents(next, len(evs), firstBody(evs))
		return evs, next, changed, nil
	}
	// Behind the broker's ring: read the Store.
	c.Tel.ReplayRead(w.ctx, "webhook")
	stored, err := c.Store.Events(w.ctx, lifecycletype.EventFilter{After: pos, Limit: workerBatch})
	if err != nil {
		return nil, pos, nil, fmt.Errorf("read events after %d: %w", pos, err)
	}
	if len(stored) > 0 {
		w.gauge.ReadStore(stored[len(stored)-1].OccurredAt.Time)
	}
	next = pos
	for i := range stored {
		e := &stored[i]
		if e.Sequence > next+1 && i == 0 {
			w.skipped(next, e.Sequence)
		}
		next = e.Sequence
		if w.sub.Keeps(e.Type, e.TaskID, e.Project) {
			dst = append(dst, broker.NewEvent(e, c.Log))
		}
	}
	if len(stored) == 0 {
		// Nothing after pos is stored, yet the ring starts after it: the
		// events in between were pruned before they could be delivered.
		base := c.Broker.Hub().Base()
		w.skipped(pos, base+1)
		w.gauge.ReadEvents(base, len(dst), firstBody(dst))
		return dst, base, nil, nil
	}
	w.gauge.ReadEvents(next, len(dst), firstBody(dst))
	return dst, next, nil, nil
}

// firstBody returns the envelope of the first of evs, or nil.
func firstBody(evs []broker.Event) []byte {
	if len(evs) == 0 {
		return nil
	}
	return evs[0].Body
}

// deliveryIdent names a pending delivery for telemetry.PendingRead.
func deliveryIdent(p *lifecycletype.Delivery) (string, []byte) { return p.ID, p.Body }

// skipped logs that the events after pos and before seq are gone: they
// were pruned (lifecycle.Config.EventRetention) before the subscription's worker
// read them, or their sequences were never used.
func (w *subWorker) skipped(pos, seq int64) {
	if seq <= pos+1 {
		return
	}
	w.d.cfg.Log.Warn("webhooks: events missing from the outbox were not delivered; they were pruned before delivery, or never committed",
		"subscription", w.sub.ID, "after", pos, "before", seq)
}

// deliver makes the attempts of the due retries and of the first
// deliveries of evs, in that order, and returns them with their outcomes.
func (w *subWorker) deliver(due []lifecycletype.Delivery, evs []broker.Event) []*attempt {
	attempts := make([]*attempt, 0, len(due)+len(evs))
	for i := range due {
		p := &due[i]
		attempts = append(attempts, &attempt{eventID: p.EventID, seq: p.EventSequence, body: p.Body, n: p.Attempt + 1, prev: p,
			typ: eventTypeOf(p.Body)})
	}
	for i := range evs {
		e := &evs[i]
		attempts = append(attempts, &attempt{eventID: e.ID, seq: e.Seq, typ: e.Type, body: e.Body, n: 1})
	}
	// Attempts start in order: first attempts in sequence order.
	webhooksend.Each(w.ctx, w.sem, w.d.global, len(attempts), func(i int) { w.post(attempts[i]) })
	return attempts
}

// post makes one attempt: it POSTs the body, signed, and notes the outcome.
func (w *subWorker) post(a *attempt) {
	c := &w.d.cfg
	a.id = id.New("dlv_")
	a.at = c.Clock.Now()
	client := w.d.client
	if w.sub.AllowPrivateTarget {
		client = w.d.privateClient
	}
	ctx, span := w.startDelivery(a)
	start := time.Now()
	out := webhooksend.Post(ctx, client, c.Timeout, &webhooksend.Attempt{URL: w.sub.URL,
		EventID: a.eventID, DeliveryID: a.id, EventType: string(a.typ), Body: a.body, Secret: w.secret, At: a.at,
		Header: w.traceHeader(ctx, span)})
	took := time.Since(start)
	a.status, a.err, a.retryAfter = out.Status, out.Failure, out.RetryAfter
	if refused := (*lifecycletype.RefusedTargetError)(nil); errors.As(out.Err, &refused) {
		a.err = refused.Reason() // the address goes to the log only
	}
	w.attempted(ctx, span, a, out.Err, took)
}

// eventTypeOf reads the type member of an envelope.
func eventTypeOf(body []byte) lifecycletype.EventType {
	var env struct {
		Type lifecycletype.EventType `json:"type"`
	}
	json.Unmarshal(body, &env) // the Service encoded it
	return env.Type
}

// record stores the outcomes of attempts and moves the subscription's
// cursor to next, in one transaction. It returns when the earliest retry
// it scheduled is due, or the zero time. A receiver that answered 410 Gone
// disables the subscription.
//
// When a replay rewound the subscription after the revision the worker
// last acted on, record returns where the worker reads on from: the
// replay's sequence, or next if that is earlier.
func (w *subWorker) record(ctx context.Context, attempts []*attempt, next int64) (time.Time, *int64, error) {
	c := &w.d.cfg
	disabled := false
	var retryAt time.Time
	var rewound *int64
	var rev int64
	err := c.Update(ctx, func(tx lifecycletype.Tx) error {
		disabled, retryAt, rewound = false, time.Time{}, nil
		sub, err := tx.Subscription(ctx, w.sub.ID)
		if errors.Is(err, lifecycletype.ErrNotFound) {
			return errSubscriptionGone
		}
		if err != nil {
			return err
		}
		if sub.LeaseOwner != w.d.cfg.Owner || sub.Status != lifecycletype.SubscriptionActive {
			return errLeaseLost
		}
		for _, a := range attempts {
			if a.id == "" {
				continue // never started
			}
			d := lifecycletype.Delivery{
				ID:             a.id,
				SubscriptionID: sub.ID,
				EventID:        a.eventID,
				EventSequence:  a.seq,
				Attempt:        a.n,
				AttemptedAt:    lifecycletype.NewTimestamp(a.at),
			}
			if a.status != 0 {
				d.ResponseStatus = &a.status
			}
			switch {
			case a.err == "":
				d.Status = lifecycletype.DeliverySucceeded
			case a.status == http.StatusGone:
				d.Status, d.Error = lifecycletype.DeliveryFailed, errorPtr(a.err+"; the subscription is disabled")
				disabled = true
			case a.n >= w.d.maxAttempts():
				d.Status, d.Error = lifecycletype.DeliveryFailed, errorPtr(fmt.Sprintf("%s; that was attempt %d, the last", a.err, a.n))
			default:
				at := lifecycletype.NewTimestamp(a.at.Add(webhooksend.Delay(c.RetrySchedule, a.n, c.RetryJitter, a.retryAfter)))
				d.Status, d.Error, d.NextAttemptAt, d.Body = lifecycletype.DeliveryPending, &a.err, &at, a.body
				if retryAt.IsZero() || at.Before(retryAt) {
					retryAt = at.Time
				}
			}
			if err := tx.CreateDelivery(ctx, d); err != nil {
				return fmt.Errorf("record delivery %s: %w", d.ID, err)
			}
			if p := a.prev; p != nil {
				p.Status, p.Body = lifecycletype.DeliveryFailed, nil
				if err := tx.UpdateDelivery(ctx, *p); err != nil {
					return fmt.Errorf("record delivery %s: %w", p.ID, err)
				}
			}
		}
		if disabled {
			sub.Status = lifecycletype.SubscriptionDisabled
		}
		if sub.Rewound && sub.Revision != w.rev {
			// Every event through next was delivered, and is recorded
			// now: read on from the replay's sequence, or from next if
			// that is earlier.
			to := min(next, sub.RewindTo)
			sub.Cursor = max(sub.Cursor, to)
			rewound = &to
		} else {
			// Not rewound, or rewound before this worker read the
			// subscription: it started at the rewound cursor.
			sub.Cursor = max(sub.Cursor, next)
		}
		sub.Rewound, rev = false, sub.Revision
		return tx.UpdateSubscription(ctx, sub)
	})
	if err != nil {
		return time.Time{}, nil, err
	}
	w.rev = rev
	if disabled {
		c.Tel.SubscriptionDisabled(ctx)
		c.Log.Warn("webhooks: the receiver answered 410 Gone; subscription disabled", "subscription", w.sub.ID)
		w.failPending(ctx, "the subscription was disabled: its receiver answered 410 Gone", rev)
		return time.Time{}, nil, errLeaseLost
	}
	if rewound != nil {
		c.Log.Info("webhooks: replaying", "subscription", w.sub.ID, "after", *rewound)
	}
	return retryAt, rewound, nil
}

// failPending marks every pending attempt of the subscription failed, with
// no next attempt, for none will follow: the subscription was disabled at
// revision rev. It stops as soon as the subscription is no longer so (an
// operator enabled it): the attempts pending then are the new life's.
func (w *subWorker) failPending(ctx context.Context, reason string, rev int64) {
	c := &w.d.cfg
	errEnabled := errors.New("enabled again")
	for {
		page, err := c.Store.Deliveries(ctx, lifecycletype.DeliveryFilter{SubscriptionID: w.sub.ID, Pending: true, Limit: workerBatch})
		pending := page.Deliveries
		if err == nil && len(pending) > 0 {
			err = c.Update(ctx, func(tx lifecycletype.Tx) error {
				sub, err := tx.Subscription(ctx, w.sub.ID)
				if err != nil {
					return err
				}
				if sub.Status != lifecycletype.SubscriptionDisabled || sub.Revision != rev {
					return errEnabled
				}
				for _, p := range pending {
					p.Status, p.Body, p.Error, p.NextAttemptAt = lifecycletype.DeliveryFailed, nil, errorPtr(reason), nil
					if err := tx.UpdateDelivery(ctx, p); err != nil {
						return err
					}
				}
				return nil
			})
		}
		switch {
		case errors.Is(err, errEnabled) || errors.Is(err, lifecycletype.ErrNotFound):
			return
		case err != nil:
			c.Log.Error("webhooks: mark the pending deliveries of a disabled subscription failed; they are attempted if it is enabled again",
				"subscription", w.sub.ID, "err", err)
			return
		case len(pending) < workerBatch:
			return
		}
	}
}

// errorPtr returns a pointer to a copy of msg, for Delivery.Error.
func errorPtr(msg string) *string { return &msg }
