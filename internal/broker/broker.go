package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fanout"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// page is the most events the broker reads from the Store at once;
// it reads at most a quarter of its ring at once, so that a burst does not
// push streams that keep up out of a small ring.
const page = 1000

// Retry is how long the broker waits before reading again after the
// Store failed; the task watches wait as long after their own reads fail.
const Retry = time.Second

// Reader is what the broker reads from the Store: where the outbox ends,
// and the events after a sequence.
type Reader interface {
	EventBounds(ctx context.Context) (lifecycletype.EventBounds, error)
	Events(ctx context.Context, f lifecycletype.EventFilter) ([]lifecycletype.Event, error)
}

// Config is what a Broker is built from.
type Config struct {
	// Store is read in sequence order after each wake-up and poll.
	Store Reader
	// Clock times the polls and the retries.
	Clock lifecycletype.Clock
	// Log gets the Store's failures and the corrupt events.
	Log *slog.Logger
	// The lifecycle.Config fields of the same names, their defaults filled
	// in: the ring keeps the last StreamLagLimit events.
	StreamLagLimit    int
	MaxStreamsPerKey  int
	EventPollInterval time.Duration
	StreamBatchWindow time.Duration
}

// Broker fans the events committed to the Store out to the open event
// streams and the webhook workers. It works from the Store interface alone:
// one goroutine reads the outbox in sequence order after each commit made
// through the Service (see Wake) and, when polling is on, every poll
// interval, so that events committed by other processes sharing the Store
// reach the streams too.
//
// What it reads goes into the ring of a [fanout.Hub], each event encoded
// once as its SSE frame and shared by every reader, so that memory is
// bounded by the ring however many streams there are and however slow. A
// stream whose position has left the ring is cut off (it resumes from its
// cursor), as is one whose write blocks longer than the write timeout,
// without holding up the others.
type Broker struct {
	hub *fanout.Hub[Event]
}

// New returns the broker of cfg: it keeps the last StreamLagLimit events
// and reads nothing until the first reader starts it.
func New(cfg Config) *Broker {
	store, log := cfg.Store, cfg.Log
	return &Broker{hub: fanout.New(fanout.Config[Event]{
		Size:      cfg.StreamLagLimit,
		Page:      min(page, max(1, cfg.StreamLagLimit/4)),
		MaxPerKey: cfg.MaxStreamsPerKey,
		Poll:      cfg.EventPollInterval,
		Retry:     Retry,
		Window:    cfg.StreamBatchWindow,
		After:     cfg.Clock.After,
		Start: func(ctx context.Context) (int64, error) {
			bounds, err := store.EventBounds(ctx)
			if err != nil {
				return 0, fmt.Errorf("start event broker: %w", err)
			}
			return bounds.Last, nil
		},
		Load: func(ctx context.Context, after int64, limit int) ([]Event, error) {
			evs, err := store.Events(ctx, lifecycletype.EventFilter{After: after, Limit: limit})
			if err != nil || len(evs) == 0 {
				return nil, err
			}
			batch := make([]Event, len(evs))
			for i := range evs {
				batch[i] = NewEvent(&evs[i], log)
			}
			return batch, nil
		},
		Seq: func(e *Event) int64 { return e.Seq },
		Failed: func(after int64, err error) {
			log.Error("event broker: read events", "after", after, "err", err)
		},
	})}
}

// Hub returns the hub whose ring holds the events, for the readers that
// hold a place in it (streams, watches) and scan it.
func (b *Broker) Hub() *fanout.Hub[Event] { return b.hub }

// Wake tells the broker that events may have been committed. It never
// blocks; wake-ups that come while one is pending are merged.
func (b *Broker) Wake() { b.hub.Wake() }

// Acquire registers a stream of the principal key, starting the broker if
// it is the first. It returns an error matching fanout.ErrLimit when key
// already holds the most streams allowed, and one matching
// lifecycletype.ErrClosed after the hub's Close. Every successful Acquire
// must be followed by one Hub().Release.
func (b *Broker) Acquire(ctx context.Context, key string) error {
	err := b.hub.Acquire(ctx, key)
	if errors.Is(err, fanout.ErrClosed) {
		return fmt.Errorf("open event stream: %w", lifecycletype.ErrClosed)
	}
	return err
}

// Start starts the broker if it has not started yet, for a reader other
// than a stream (the webhook dispatcher). It returns an error matching
// lifecycletype.ErrClosed after the hub's Close.
func (b *Broker) Start(ctx context.Context) error {
	err := b.hub.Start(ctx)
	if errors.Is(err, fanout.ErrClosed) {
		return fmt.Errorf("start event broker: %w", lifecycletype.ErrClosed)
	}
	return err
}

// Events appends to dst the buffered events after pos that keep keeps, at
// most limit of them (see fanout.Scan).
func (b *Broker) Events(pos int64, keep func(*Event) bool, dst []Event, limit int) (evs []Event, next int64, changed <-chan struct{}, ok bool) {
	return fanout.Scan(b.hub, pos, dst, limit, keep, func(e *Event) Event { return *e })
}

// Event is an event held by the ring: what filters need, its frame and
// its envelope. Its byte slices are never written once made.
type Event struct {
	// Seq, Type, ID, TaskID and Project are the stored event's: what
	// readers filter on and name it by.
	Seq     int64
	Type    lifecycletype.EventType
	ID      string
	TaskID  string
	Project string
	Frame   []byte    // the SSE frame
	Body    []byte    // the envelope JSON, within Frame: a webhook's body
	At      time.Time // when the change was committed (its occurredAt)
}

// NewEvent encodes e once for both the streams and the webhooks.
func NewEvent(e *lifecycletype.Event, log *slog.Logger) Event {
	frame, err := AppendFrame(nil, e)
	if err != nil {
		log.Error("stored event is corrupt; sent with null data", "event", e.ID, "err", err)
	}
	// The frame ends with the envelope, after "data: ", and "\n\n".
	start := bytes.LastIndex(frame, []byte("\ndata: ")) + len("\ndata: ")
	return Event{Seq: e.Sequence, Type: e.Type, ID: e.ID, TaskID: e.TaskID, Project: e.Project,
		Frame: frame, Body: frame[start : len(frame)-2 : len(frame)-2], At: e.OccurredAt.Time}
}

// Decode decodes the envelope the ring holds back into an Event.
func (e *Event) Decode() (lifecycletype.Event, error) {
	var ev lifecycletype.Event
	if err := json.Unmarshal(e.Body, &ev); err != nil {
		return lifecycletype.Event{}, fmt.Errorf("decode event %s: %w", e.ID, err)
	}
	ev.TaskID, ev.Project = e.TaskID, e.Project
	return ev, nil
}
