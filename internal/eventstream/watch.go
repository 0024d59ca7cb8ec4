package eventstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/fanout"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// The watches of single tasks serve a host that pushes changes to clients
// of its own (package mcp's resource subscriptions and
// wait_for_task_change), fed from the broker that feeds the event
// streams, so that nothing polls the Store.

// watchPage is the most events the watch dispatcher handles at once.
const watchPage = 256

// watchReader is the key under which the watch dispatcher holds its place
// among the broker's readers: one place for every watch, whatever their
// number, so that watches never count against a principal's streams
// (Config.MaxStreamsPerKey). No principal ID holds a NUL byte.
const watchReader = "\x00lifecycle:task-watches"

// Watch is a watch of one task's events, made by [Watches.Watch].
type Watch struct {
	ws      *Watches
	taskID  string
	fn      func(*lifecycletype.Event)
	done    chan struct{}
	stopped atomic.Bool
	unhook  func() bool // stops the context's AfterFunc; set before the watch is added
}

// Stop ends the watch. It may be called more than once, and from fn. An
// event being delivered while Stop runs may still reach fn; none does
// once Stop has returned, unless Stop was called from fn itself.
func (w *Watch) Stop() {
	w.unhook()
	w.ws.remove(w)
}

// Done returns a channel closed when the watch ends: by Stop, by the end
// of the context given to Watches.Watch, or when the broker closes.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Watches are the watches of a Service and the goroutine that serves
// them: one reader of the broker's ring, started with the first watch and
// ended when the last stops, or when the broker closes.
type Watches struct {
	broker *broker.Broker
	store  broker.Reader
	clock  lifecycletype.Clock
	log    *slog.Logger

	mu      sync.Mutex
	byTask  map[string]map[*Watch]struct{}
	count   int
	running bool          // the dispatcher runs (or is starting)
	closed  bool          // the broker closed: no more watches
	idle    chan struct{} // pokes the dispatcher when the last watch stops
}

// NewWatches returns the watches fed by b, which read what they missed
// from store, wait on clock after a failed read, and log to log.
func NewWatches(b *broker.Broker, store broker.Reader, clock lifecycletype.Clock, log *slog.Logger) *Watches {
	return &Watches{broker: b, store: store, clock: clock, log: log}
}

// Watch calls fn with each event of the task taskID that is committed
// after Watch returns (and possibly one committed just before), in
// sequence order, until the watch is stopped, ctx ends or the broker
// closes. fn is called from the one goroutine that serves every watch; the
// *Event is shared by the watches of the task. It returns an error
// matching lifecycletype.ErrClosed after the broker closed, and the
// Store's error when the broker could not start.
func (ws *Watches) Watch(ctx context.Context, taskID string, fn func(*lifecycletype.Event)) (*Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &Watch{ws: ws, taskID: taskID, fn: fn, done: make(chan struct{})}
	w.unhook = context.AfterFunc(ctx, func() { ws.remove(w) })
	if err := ws.add(ctx, w); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// add registers w, starting the dispatcher when it is the first watch.
func (ws *Watches) add(ctx context.Context, w *Watch) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return fmt.Errorf("watch task %s: %w", w.taskID, lifecycletype.ErrClosed)
	}
	if w.stopped.Load() { // its context ended meanwhile
		return context.Cause(ctx)
	}
	if !ws.running {
		// The first watch (again): take a place among the broker's readers,
		// which starts the broker if no stream has.
		if err := ws.broker.Hub().Acquire(ctx, watchReader); err != nil {
			if errors.Is(err, fanout.ErrClosed) {
				return fmt.Errorf("watch task %s: %w", w.taskID, lifecycletype.ErrClosed)
			}
			return fmt.Errorf("watch task %s: %w", w.taskID, err)
		}
		ws.running = true
		if ws.idle == nil {
			ws.idle = make(chan struct{}, 1)
		}
		go ws.run(ws.broker.Hub().Position())
	}
	if ws.byTask == nil {
		ws.byTask = make(map[string]map[*Watch]struct{})
	}
	set := ws.byTask[w.taskID]
	if set == nil {
		set = make(map[*Watch]struct{})
		ws.byTask[w.taskID] = set
	}
	set[w] = struct{}{}
	ws.count++
	return nil
}

// remove unregisters w and closes its Done, once.
func (ws *Watches) remove(w *Watch) {
	if w.stopped.Swap(true) {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if set, ok := ws.byTask[w.taskID]; ok {
		if _, ok := set[w]; ok {
			delete(set, w)
			if len(set) == 0 {
				delete(ws.byTask, w.taskID)
			}
			ws.count--
		}
	}
	close(w.done)
	if ws.count == 0 && ws.running {
		select {
		case ws.idle <- struct{}{}:
		default:
		}
	}
}

// watchDelivery is one event to hand to the watches of its task.
type watchDelivery struct {
	ev      broker.Event
	watches []*Watch
}

// run serves the watches from the broker's ring, from the sequence pos on,
// until no watch is left or the broker closes. It holds the place taken by
// add, which finish gives back.
func (ws *Watches) run(pos int64) {
	hub := ws.broker.Hub()
	ctx := hub.Context()
	keep := func(*broker.Event) bool { return true }
	take := func(e *broker.Event) broker.Event { return *e }
	batch := make([]broker.Event, 0, watchPage)
	var stored []lifecycletype.Event
	for {
		var (
			next    int64
			changed <-chan struct{}
			ok      bool
		)
		batch, next, changed, ok = fanout.Scan(hub, pos, batch[:0], watchPage, keep, take)
		if !ok {
			// The dispatcher fell out of the ring (a burst larger than the
			// ring while it delivered): read what it missed from the Store,
			// as a stream that fell behind replays.
			var err error
			if stored, pos, err = ws.catchUp(ctx, pos, stored[:0]); err != nil && ctx.Err() == nil {
				ws.log.Error("task watches: read missed events", "after", pos, "err", err)
				select {
				case <-ctx.Done():
				case <-ws.clock.After(broker.Retry):
				}
			}
			if ctx.Err() != nil && ws.finish() {
				return
			}
			continue
		}
		pos = next
		ws.deliverRing(batch)
		if ws.finish() {
			return
		}
		select {
		case <-changed:
		case <-ws.idle: // the last watch stopped: finish decides
		case <-ctx.Done():
		}
	}
}

// catchUp reads a page of the stored events after pos and delivers those
// that watches wait for. It returns the position read through.
func (ws *Watches) catchUp(ctx context.Context, pos int64, buf []lifecycletype.Event) ([]lifecycletype.Event, int64, error) {
	// Every event up to the broker's position before the read had been
	// committed, so a short page holds all of them.
	through := ws.broker.Hub().Position()
	evs, err := ws.store.Events(ctx, lifecycletype.EventFilter{After: pos, Limit: watchPage})
	if err != nil {
		return buf, pos, err
	}
	for i := range evs {
		e := &evs[i]
		for _, w := range ws.watchersOf(e.TaskID) {
			if !w.stopped.Load() {
				w.fn(e)
			}
		}
		pos = e.Sequence
	}
	if len(evs) < watchPage {
		pos = max(pos, through)
	}
	return evs, pos, nil
}

// watchersOf returns the watches of task taskID.
func (ws *Watches) watchersOf(taskID string) []*Watch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	set := ws.byTask[taskID]
	if len(set) == 0 {
		return nil
	}
	out := make([]*Watch, 0, len(set))
	for w := range set {
		out = append(out, w)
	}
	return out
}

// deliverRing hands the events of batch to the watches of their tasks,
// decoding each event that has watches once, outside the lock.
func (ws *Watches) deliverRing(batch []broker.Event) {
	var todo []watchDelivery
	ws.mu.Lock()
	for i := range batch {
		set := ws.byTask[batch[i].TaskID]
		if len(set) == 0 {
			continue
		}
		d := watchDelivery{ev: batch[i], watches: make([]*Watch, 0, len(set))}
		for w := range set {
			d.watches = append(d.watches, w)
		}
		todo = append(todo, d)
	}
	ws.mu.Unlock()
	for i := range todo {
		ev, err := todo[i].ev.Decode()
		if err != nil {
			ws.log.Error("task watches: the broker holds an event that does not decode", "event", todo[i].ev.ID, "err", err)
			continue
		}
		for _, w := range todo[i].watches {
			if !w.stopped.Load() {
				w.fn(&ev)
			}
		}
	}
}

// finish ends the dispatcher when no watch is left or the broker closed
// (then it ends every watch, and later Watch calls fail), giving its
// place among the broker's readers back; it reports whether it did. It
// decides under the lock that add takes, so that a watch added meanwhile
// either keeps this dispatcher running or starts the next.
func (ws *Watches) finish() bool {
	ws.mu.Lock()
	closing := ws.broker.Hub().Context().Err() != nil
	if ws.count > 0 && !closing {
		ws.mu.Unlock()
		return false
	}
	var ended []*Watch
	if closing {
		ws.closed = true
		for _, set := range ws.byTask {
			for w := range set {
				ended = append(ended, w)
			}
		}
	}
	ws.running = false
	// A poke left by a watch stopped meanwhile must not wake the next
	// dispatcher for nothing.
	select {
	case <-ws.idle:
	default:
	}
	ws.broker.Hub().Release(watchReader)
	ws.mu.Unlock()
	for _, w := range ended {
		w.Stop()
	}
	return true
}
