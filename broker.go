package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// brokerPage is the most events the broker reads from the Store at once;
// it reads at most a quarter of its ring at once, so that a burst does not
// push streams that keep up out of a small ring.
const brokerPage = 1000

// brokerRetry is how long the broker waits before reading again after the
// Store failed.
const brokerRetry = time.Second

// broker fans the events committed to the Store out to the open event
// streams. It works from the Store interface alone: one goroutine reads the
// outbox in sequence order after each commit made through the Service (see
// [Service.update]) and, when polling is on, every poll interval, so that
// events committed by other processes sharing the Store reach the streams
// too.
//
// What it reads goes into a ring of the most recent events, each encoded
// once as its SSE frame and shared by every stream. Streams hold no queue of
// their own: each keeps the sequence it has read through, reads the frames
// after it from the ring, and waits on a channel the broker closes whenever
// the ring grows. Memory is therefore bounded by the ring, however many
// streams there are and however slow they are; a stream whose position has
// left the ring is too far behind and is cut off (it resumes from its
// cursor), and a write that blocks longer than the write timeout cuts its
// consumer off too, without holding up the others.
type broker struct {
	store     Store
	clock     Clock
	log       *slog.Logger
	poll      time.Duration // <= 0: no polling
	maxPerKey int
	page      int           // events read from the Store at once
	window    time.Duration // least time between catch-ups under load; <= 0: none

	ctx    context.Context // cancelled by close; bounds Store calls
	cancel context.CancelFunc
	wakeC  chan struct{} // capacity 1: a pending wake-up
	wg     sync.WaitGroup

	mu      sync.RWMutex
	ring    ring
	tail    int64         // every event with a sequence <= tail has been read
	changed chan struct{} // closed and replaced whenever tail moves
	started bool
	closed  bool
	perKey  map[string]int // open streams per principal ID
}

// newBroker returns a broker that keeps the last lagLimit events. It reads
// nothing until the first stream opens.
func newBroker(store Store, clock Clock, log *slog.Logger, lagLimit, maxPerKey int, poll time.Duration) *broker {
	ctx, cancel := context.WithCancel(context.Background())
	return &broker{
		store:     store,
		clock:     clock,
		log:       log,
		poll:      poll,
		maxPerKey: maxPerKey,
		page:      min(brokerPage, max(1, lagLimit/4)),
		ctx:       ctx,
		cancel:    cancel,
		wakeC:     make(chan struct{}, 1),
		ring:      ring{buf: make([]ringEvent, lagLimit)},
		changed:   make(chan struct{}),
		perKey:    make(map[string]int),
	}
}

// wake tells the broker that events may have been committed. It never
// blocks; wake-ups that come while one is pending are merged.
func (b *broker) wake() {
	select {
	case b.wakeC <- struct{}{}:
	default:
	}
}

// acquire registers a stream of the principal key, starting the broker if
// it is the first. It returns a *RateLimitError when key already holds the
// most streams allowed, and an error matching ErrClosed after close. Every
// successful acquire must be followed by one release.
func (b *broker) acquire(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("open event stream: %w", ErrClosed)
	}
	if b.perKey[key] >= b.maxPerKey {
		return &RateLimitError{
			RetryAfterSeconds: streamRetryAfter,
			Message:           fmt.Sprintf("This API key already holds %d open event streams, the most allowed; close one or retry later", b.maxPerKey),
		}
	}
	if err := b.startLocked(ctx); err != nil {
		return err
	}
	b.perKey[key]++
	b.wg.Add(1)
	return nil
}

// start starts the broker if it has not started yet, for a reader other
// than a stream (the webhook dispatcher).
func (b *broker) start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("start event broker: %w", ErrClosed)
	}
	return b.startLocked(ctx)
}

// startLocked starts the broker unless it has started. b.mu is held.
func (b *broker) startLocked(ctx context.Context) error {
	if b.started {
		return nil
	}
	// The live tail starts at the last committed event. Nothing reads
	// the ring before this returns, as the write lock is held.
	bounds, err := b.store.EventBounds(ctx)
	if err != nil {
		return fmt.Errorf("start event broker: %w", err)
	}
	b.tail, b.ring.base = bounds.Last, bounds.Last
	b.started = true
	b.wg.Add(1)
	go b.run()
	return nil
}

// release unregisters a stream registered by acquire.
func (b *broker) release(key string) {
	b.mu.Lock()
	if b.perKey[key]--; b.perKey[key] <= 0 {
		delete(b.perKey, key)
	}
	b.mu.Unlock()
	b.wg.Done()
}

// close stops the broker and tells every stream to end. Call wait to know
// when they have.
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	b.cancel()
}

// wait blocks until the broker's goroutine and every stream have ended.
// It is only meaningful after close.
func (b *broker) wait() { b.wg.Wait() }

// run reads new events into the ring whenever woken, polled or retrying,
// until close.
func (b *broker) run() {
	defer b.wg.Done()
	var pollC, retryC <-chan time.Time
	if b.poll > 0 {
		pollC = b.clock.After(b.poll)
	}
	var last time.Time // when the last catch-up began, by the wall clock
	for {
		last = time.Now()
		if err := b.catchUp(); err != nil {
			if b.ctx.Err() != nil {
				return
			}
			b.log.Error("event broker: read events", "after", b.position(), "err", err)
			if retryC == nil {
				retryC = b.clock.After(brokerRetry)
			}
		}
		select {
		case <-b.ctx.Done():
			return
		case <-b.wakeC:
			// Woken again within the window: events are coming fast. Wait
			// for the window to pass so that this catch-up takes the
			// commits of the whole window, and every stream writes them
			// in one call.
			if wait := b.window - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-b.ctx.Done():
					t.Stop()
					return
				}
			}
		case <-pollC:
			pollC = b.clock.After(b.poll)
		case <-retryC:
			retryC = nil
		}
	}
}

// catchUp reads every event after tail into the ring.
func (b *broker) catchUp() error {
	for {
		after := b.position()
		evs, err := b.store.Events(b.ctx, EventFilter{After: after, Limit: b.page})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		batch := make([]ringEvent, len(evs))
		for i := range evs {
			batch[i] = newRingEvent(&evs[i], b.log)
		}
		b.mu.Lock()
		for _, re := range batch {
			b.ring.push(re)
		}
		b.tail = batch[len(batch)-1].seq
		close(b.changed)
		b.changed = make(chan struct{})
		b.mu.Unlock()
		if len(evs) < b.page {
			return nil
		}
	}
}

// base returns the sequence after which the ring holds every event read.
func (b *broker) base() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.ring.base
}

// position returns the sequence the broker has read through.
func (b *broker) position() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.tail
}

// read appends to dst the frames of the buffered events after pos that f
// keeps, at most limit of them, and returns them with the sequence read
// through and a channel that is closed when more events arrive. ok is false
// when the ring no longer holds every event after pos: the caller is behind
// the ring and must read the Store, or be cut off.
func (b *broker) read(pos int64, f *streamFilter, dst [][]byte, limit int) (frames [][]byte, next int64, changed <-chan struct{}, ok bool) {
	return scanRing(b, pos, dst, limit,
		func(e *ringEvent) bool { return f.keep(e.typ, e.taskID) },
		func(e *ringEvent) []byte { return e.frame })
}

// events appends to dst the buffered events after pos that keep keeps, at
// most limit of them, like read.
func (b *broker) events(pos int64, keep func(*ringEvent) bool, dst []ringEvent, limit int) (evs []ringEvent, next int64, changed <-chan struct{}, ok bool) {
	return scanRing(b, pos, dst, limit, keep, func(e *ringEvent) ringEvent { return *e })
}

// scanRing appends to dst what take makes of the buffered events after pos
// that keep keeps, for read and events.
func scanRing[T any](b *broker, pos int64, dst []T, limit int, keep func(*ringEvent) bool, take func(*ringEvent) T) ([]T, int64, <-chan struct{}, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if pos < b.ring.base {
		return dst, pos, nil, false
	}
	next := pos
	for i := b.ring.search(pos); i < b.ring.n; i++ {
		e := b.ring.at(i)
		if keep(e) {
			if len(dst) == limit {
				return dst, next, b.changed, true
			}
			dst = append(dst, take(e))
		}
		next = e.seq
	}
	return dst, max(next, b.tail), b.changed, true
}

// ringEvent is an event held by the ring: what filters need, its frame and
// its envelope. Its byte slices are never written once made.
type ringEvent struct {
	seq     int64
	typ     EventType
	id      string
	taskID  string
	project string
	frame   []byte // the SSE frame
	body    []byte // the envelope JSON, within frame: a webhook's body
}

// newRingEvent encodes e once for both the streams and the webhooks.
func newRingEvent(e *Event, log *slog.Logger) ringEvent {
	frame, err := appendFrame(nil, e)
	if err != nil {
		log.Error("stored event is corrupt; sent with null data", "event", e.ID, "err", err)
	}
	// The frame ends with the envelope, after "data: ", and "\n\n".
	start := bytes.LastIndex(frame, []byte("\ndata: ")) + len("\ndata: ")
	return ringEvent{seq: e.Sequence, typ: e.Type, id: e.ID, taskID: e.TaskID, project: e.Project,
		frame: frame, body: frame[start : len(frame)-2 : len(frame)-2]}
}

// ring is a fixed-size circular buffer of the most recent events, oldest
// first. It holds every event read with a sequence greater than base.
type ring struct {
	buf   []ringEvent
	start int   // index in buf of the oldest event
	n     int   // events held
	base  int64 // the sequence of the last event dropped, or where reading started
}

// push appends e, dropping the oldest event when the ring is full.
func (r *ring) push(e ringEvent) {
	if r.n == len(r.buf) {
		r.base = r.buf[r.start].seq
		r.buf[r.start] = e
		r.start = (r.start + 1) % len(r.buf)
		return
	}
	r.buf[(r.start+r.n)%len(r.buf)] = e
	r.n++
}

// at returns the i-th oldest event held.
func (r *ring) at(i int) *ringEvent { return &r.buf[(r.start+i)%len(r.buf)] }

// search returns the index of the oldest event with a sequence greater than
// seq, or n when there is none.
func (r *ring) search(seq int64) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).seq > seq })
}
