package telemetry

import (
	"bytes"
	"encoding/hex"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Envelope members the telemetry reads from an event's JSON: the
// lifecycle Service writes them before "data" (see its appendEventJSON and
// Event's fields), so the first occurrence is the member, and an
// occurrence within a string would be escaped.
var (
	traceIDMember    = []byte(`"traceId":`)
	occurredAtMember = []byte(`"occurredAt":`)
)

// EventTraceID returns the traceId of an event's envelope, when it has
// one (it may be null).
func EventTraceID(body []byte) (trace.TraceID, bool) {
	var tid trace.TraceID
	v, ok := envelopeMember(body, traceIDMember, 2*len(tid)+2)
	if !ok || v[0] != '"' || v[len(v)-1] != '"' {
		return tid, false
	}
	v = v[1 : len(v)-1]
	if _, err := hex.Decode(tid[:], v); err != nil {
		return tid, false
	}
	return tid, tid.IsValid()
}

// OccurredAt returns the occurredAt of an event's envelope in Unix
// nanoseconds, or 0 when it cannot be read. It reads the Service's own
// layout (milliseconds, in UTC: "2006-01-02T15:04:05.000Z") without
// allocating.
func OccurredAt(body []byte) int64 {
	v, ok := envelopeMember(body, occurredAtMember, len(`"2006-01-02T15:04:05.000Z"`))
	if !ok || v[0] != '"' {
		return 0
	}
	v = v[1:]
	if v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' || v[19] != '.' || v[23] != 'Z' {
		return 0
	}
	num := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(v[0:4]), num(v[5:7]), num(v[8:10])
	hour, minute, sec, milli := num(v[11:13]), num(v[14:16]), num(v[17:19]), num(v[20:23])
	if min(year, month, day, hour, minute, sec, milli) < 0 {
		return 0
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, milli*int(time.Millisecond), time.UTC).UnixNano()
}

// envelopeMember returns the n bytes after the first occurrence of key in
// body.
func envelopeMember(body, key []byte, n int) ([]byte, bool) {
	i := bytes.Index(body, key)
	if i < 0 || len(body)-(i+len(key)) < n {
		return nil, false
	}
	i += len(key)
	return body[i : i+n], true
}

// maxTrackedPending is the most pending retries a Backlog keeps the event
// times of, for the lag: beyond it they are counted only. It is 16 pages
// of a webhook worker's reads (256 each).
const maxTrackedPending = 16 * 256

// Backlog is what a webhook subscription's worker keeps in memory for the
// gauges lifecycle.webhook.backlog and lifecycle.webhook.lag, so that a
// scrape reads no Store. The worker's goroutine and its attempts write
// it; the gauges' callback reads it. Times are Unix nanoseconds of
// events' occurredAt, 0 when unknown.
//
// An event not yet delivered is one after the sequence the worker has
// read through (its filters may drop some of them: the backlog counts
// them until the worker reads past them), one whose first attempt is in
// flight, or one whose delivery is pending a retry.
type Backlog struct {
	mu sync.Mutex
	// read is the sequence the worker has read the outbox through.
	read int64
	// storeRead is the time of the last event the worker read from the
	// Store, behind the broker's ring: the unread events are younger.
	storeRead int64
	// flying counts the first attempts of the last read in flight, and
	// flyingSince is the time of the oldest of their events.
	flying      int
	flyingSince int64
	// pending holds the event times of the pending retries known, by
	// delivery ID, at most maxTrackedPending of them; pendingN counts
	// them all. oldest is the earliest time in pending, unless stale.
	pending  map[string]int64
	pendingN int
	oldest   int64
	stale    bool
	// attrs is the lifecycle.subscription.id of the measures, made at
	// the first scrape that asks for it.
	attrs metric.MeasurementOption
}

// ReadEvents notes a read of the outbox through next, whose n events
// the worker delivers now, the first of them first (nil when n is 0).
func (g *Backlog) ReadEvents(next int64, n int, first []byte) {
	var since int64
	if n > 0 {
		since = OccurredAt(first)
	}
	g.mu.Lock()
	g.read, g.flying, g.flyingSince = next, n, since
	g.mu.Unlock()
}

// ReadStore notes that the worker read the outbox from the Store, the
// last event it read having occurred at last.
func (g *Backlog) ReadStore(last time.Time) {
	g.mu.Lock()
	g.storeRead = last.UnixNano()
	g.mu.Unlock()
}

// ReadsAfter notes that the worker reads on after to, as it starts or
// once rewound: the time of the last event it read from the Store no
// longer bounds the unread ones.
func (g *Backlog) ReadsAfter(to int64) {
	g.mu.Lock()
	g.read, g.storeRead = to, 0
	g.mu.Unlock()
}

// PendingRead notes the pending retries the worker read from the Store
// into g, each named by ident (its delivery ID, and the body of its
// event): every one of them when all is true, else the earliest due.
func PendingRead[T any](g *Backlog, pending []T, ident func(*T) (id string, body []byte), all bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if all {
		clear(g.pending)
		g.pendingN, g.oldest, g.stale = 0, 0, false
	}
	for i := range pending {
		id, body := ident(&pending[i])
		if _, ok := g.pending[id]; !ok && (all || len(g.pending) < maxTrackedPending) {
			// Beyond maxTrackedPending, one not tracked may have been
			// counted already.
			g.addLocked(id, OccurredAt(body))
		}
	}
	g.pendingN = max(g.pendingN, len(pending))
}

// Attempted notes what came of an attempt, id, at delivering the event
// whose envelope is body: the event is delivered, or given up, unless
// retried. prevID is the pending attempt it retried, "" for a first
// attempt.
func (g *Backlog) Attempted(prevID, id string, body []byte, retried bool) {
	var at int64
	if retried {
		at = OccurredAt(body)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if prevID == "" {
		g.flying--
	} else {
		g.removeLocked(prevID)
	}
	if retried {
		g.addLocked(id, at)
	}
}

func (g *Backlog) addLocked(deliveryID string, at int64) {
	g.pendingN++
	if len(g.pending) >= maxTrackedPending {
		return
	}
	if g.pending == nil {
		g.pending = make(map[string]int64)
	}
	g.pending[deliveryID] = at
	if at != 0 && (g.oldest == 0 || at < g.oldest) {
		g.oldest = at
	}
}

func (g *Backlog) removeLocked(deliveryID string) {
	at, ok := g.pending[deliveryID]
	if !ok && g.pendingN <= len(g.pending) {
		return // not known as pending
	}
	g.pendingN--
	if ok {
		delete(g.pending, deliveryID)
		if at == g.oldest {
			g.stale = true
		}
	}
}

// BacklogState is a copy of what a Backlog says. Times are Unix
// nanoseconds of events' occurredAt, 0 when unknown.
type BacklogState struct {
	// Read is the sequence the worker has read the outbox through, and
	// StoreRead the time of the last event it read from the Store.
	Read, StoreRead int64
	// Flying counts the first attempts in flight, and FlyingSince is the
	// time of the oldest of their events.
	Flying      int
	FlyingSince int64
	// PendingN counts the pending retries, and Oldest is the time of the
	// oldest of their events.
	PendingN int
	Oldest   int64
	// Attrs names the subscription, or is nil (see GaugeObserver.Observe).
	Attrs metric.MeasurementOption
}

// State returns what g says now; subID names the subscription in its
// Attrs, which are nil when subID is "".
func (g *Backlog) State(subID string) BacklogState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stale {
		g.oldest, g.stale = 0, false
		for _, at := range g.pending {
			if at != 0 && (g.oldest == 0 || at < g.oldest) {
				g.oldest = at
			}
		}
	}
	if g.attrs == nil && subID != "" {
		g.attrs = SubscriptionAttrs(subID)
	}
	st := BacklogState{Read: g.read, StoreRead: g.storeRead, Flying: max(g.flying, 0), PendingN: g.pendingN}
	if subID != "" {
		st.Attrs = g.attrs
	}
	if st.Flying > 0 {
		st.FlyingSince = g.flyingSince
	}
	if g.pendingN > 0 {
		st.Oldest = g.oldest
	}
	return st
}
