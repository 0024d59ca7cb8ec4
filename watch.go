package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/fanout"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
)

// This file holds the watches of single tasks: what a host that pushes
// changes to clients of its own (package mcp's resource subscriptions and
// wait_for_task_change) needs, fed from the broker that feeds the event
// streams, so that nothing polls the Store.

// watchPage is the most events the watch dispatcher handles at once.
const watchPage = 256

// watchReader is the key under which the watch dispatcher holds its place
// among the broker's readers: one place for every watch, whatever their
// number, so that watches never count against a principal's streams
// (Config.MaxStreamsPerKey). No principal ID holds a NUL byte.
const watchReader = "\x00lifecycle:task-watches"

// TaskWatch is a watch of one task's events, made by [Service.WatchTask].
type TaskWatch struct {
	s       *Service
	taskID  string
	fn      func(*Event)
	done    chan struct{}
	stopped atomic.Bool
	unhook  func() bool // stops the context's AfterFunc; set before the watch is added
}

// Stop ends the watch. It may be called more than once, and from fn. An
// event being delivered while Stop runs may still reach fn; none does
// once Stop has returned, unless Stop was called from fn itself.
func (w *TaskWatch) Stop() {
	w.unhook()
	w.s.watches.remove(w)
}

// Done returns a channel closed when the watch ends: by Stop, by the end
// of the context given to WatchTask, or by [Service.Close].
func (w *TaskWatch) Done() <-chan struct{} { return w.done }

// WatchTask calls fn with each event of the task taskID that is committed
// after WatchTask returns (and possibly one committed just before), in
// sequence order, until the watch is stopped, ctx ends or the Service
// closes. The events come from the broker that feeds the event streams
// (GET /task-events/stream), read once from the Store for every stream
// and watch, so a watch costs no Store read of its own: commits made
// through this Service reach it at once, those of other processes sharing
// the Store within [Config.EventPollInterval].
//
// fn is called from one goroutine that serves every watch of the Service:
// it must return quickly and never block (hand the event to a buffered
// channel or a goroutine of your own). The *Event is shared by the
// watches of the task: read it, never write it. Watches are not counted
// against [Config.MaxStreamsPerKey]; every watch of a Service shares one
// reader of the broker. WatchTask does not check that the task exists.
// It returns an error matching ErrClosed after [Service.Close], and the
// Store's error when the broker could not start.
func (s *Service) WatchTask(ctx context.Context, taskID string, fn func(*Event)) (*TaskWatch, error) {
	if fn == nil {
		return nil, errors.New("lifecycle: WatchTask needs a function to call")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &TaskWatch{s: s, taskID: taskID, fn: fn, done: make(chan struct{})}
	w.unhook = context.AfterFunc(ctx, func() { s.watches.remove(w) })
	if err := s.watches.add(ctx, s, w); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// Done returns a channel that is closed when [Service.Close] is called:
// work that lasts as long as its client (a wait, a stream of a protocol
// of the host's) ends with it.
func (s *Service) Done() <-chan struct{} { return s.broker.Hub().Context().Done() }

// TaskEventsAfter returns up to limit of the stored events of task taskID
// whose sequence is greater than after, oldest first: what a client that
// saw the event of sequence after missed since. An unknown task has none.
func (s *Service) TaskEventsAfter(ctx context.Context, taskID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 || !validTaskID(taskID) {
		return []Event{}, nil
	}
	evs, err := s.store.Events(ctx, EventFilter{TaskID: taskID, After: after, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("read the events of %s after sequence %d: %w", taskID, after, err)
	}
	return httpapi.NonNil(evs), nil
}

// taskWatches are the watches of a Service and the goroutine that serves
// them: one reader of the broker's ring, started with the first watch and
// ended when the last stops, or at Close.
type taskWatches struct {
	mu      sync.Mutex
	byTask  map[string]map[*TaskWatch]struct{}
	count   int
	running bool          // the dispatcher runs (or is starting)
	closed  bool          // the broker closed: no more watches
	idle    chan struct{} // pokes the dispatcher when the last watch stops
}

// add registers w, starting the dispatcher when it is the first watch.
func (ws *taskWatches) add(ctx context.Context, s *Service, w *TaskWatch) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return fmt.Errorf("watch task %s: %w", w.taskID, ErrClosed)
	}
	if w.stopped.Load() { // its context ended meanwhile
		return context.Cause(ctx)
	}
	if !ws.running {
		// The first watch (again): take a place among the broker's readers,
		// which starts the broker if no stream has.
		if err := s.broker.Hub().Acquire(ctx, watchReader); err != nil {
			if errors.Is(err, fanout.ErrClosed) {
				return fmt.Errorf("watch task %s: %w", w.taskID, ErrClosed)
			}
			return fmt.Errorf("watch task %s: %w", w.taskID, err)
		}
		ws.running = true
		if ws.idle == nil {
			ws.idle = make(chan struct{}, 1)
		}
		go ws.run(s, s.broker.Hub().Position())
	}
	if ws.byTask == nil {
		ws.byTask = make(map[string]map[*TaskWatch]struct{})
	}
	set := ws.byTask[w.taskID]
	if set == nil {
		set = make(map[*TaskWatch]struct{})
		ws.byTask[w.taskID] = set
	}
	set[w] = struct{}{}
	ws.count++
	return nil
}

// remove unregisters w and closes its Done, once.
func (ws *taskWatches) remove(w *TaskWatch) {
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
	watches []*TaskWatch
}

// run serves the watches from the broker's ring, from the sequence pos on,
// until no watch is left or the broker closes. It holds the place taken by
// add, which finish gives back.
func (ws *taskWatches) run(s *Service, pos int64) {
	hub := s.broker.Hub()
	ctx := hub.Context()
	keep := func(*broker.Event) bool { return true }
	take := func(e *broker.Event) broker.Event { return *e }
	batch := make([]broker.Event, 0, watchPage)
	var stored []Event
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
			if stored, pos, err = ws.catchUp(ctx, s, pos, stored[:0]); err != nil && ctx.Err() == nil {
				s.log.Error("task watches: read missed events", "after", pos, "err", err)
				select {
				case <-ctx.Done():
				case <-s.clock.After(broker.Retry):
				}
			}
			if ctx.Err() != nil && ws.finish(s) {
				return
			}
			continue
		}
		pos = next
		ws.deliverRing(s, batch)
		if ws.finish(s) {
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
func (ws *taskWatches) catchUp(ctx context.Context, s *Service, pos int64, buf []Event) ([]Event, int64, error) {
	// Every event up to the broker's position before the read had been
	// committed, so a short page holds all of them.
	through := s.broker.Hub().Position()
	evs, err := s.store.Events(ctx, EventFilter{After: pos, Limit: watchPage})
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
func (ws *taskWatches) watchersOf(taskID string) []*TaskWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	set := ws.byTask[taskID]
	if len(set) == 0 {
		return nil
	}
	out := make([]*TaskWatch, 0, len(set))
	for w := range set {
		out = append(out, w)
	}
	return out
}

// deliverRing hands the events of batch to the watches of their tasks,
// decoding each event that has watches once, outside the lock.
func (ws *taskWatches) deliverRing(s *Service, batch []broker.Event) {
	var todo []watchDelivery
	ws.mu.Lock()
	for i := range batch {
		set := ws.byTask[batch[i].TaskID]
		if len(set) == 0 {
			continue
		}
		d := watchDelivery{ev: batch[i], watches: make([]*TaskWatch, 0, len(set))}
		for w := range set {
			d.watches = append(d.watches, w)
		}
		todo = append(todo, d)
	}
	ws.mu.Unlock()
	for i := range todo {
		ev, err := todo[i].ev.Decode()
		if err != nil {
			s.log.Error("task watches: the broker holds an event that does not decode", "event", todo[i].ev.ID, "err", err)
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
// (then it ends every watch, and later WatchTask calls fail), giving its
// place among the broker's readers back; it reports whether it did. It
// decides under the lock that add takes, so that a watch added meanwhile
// either keeps this dispatcher running or starts the next.
func (ws *taskWatches) finish(s *Service) bool {
	ws.mu.Lock()
	closing := s.broker.Hub().Context().Err() != nil
	if ws.count > 0 && !closing {
		ws.mu.Unlock()
		return false
	}
	var ended []*TaskWatch
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
	s.broker.Hub().Release(watchReader)
	ws.mu.Unlock()
	for _, w := range ended {
		w.Stop()
	}
	return true
}
