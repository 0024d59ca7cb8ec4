package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fanout"
)

// brokerPage is the most events the broker reads from the Store at once;
// it reads at most a quarter of its ring at once, so that a burst does not
// push streams that keep up out of a small ring.
const brokerPage = 1000

// brokerRetry is how long the broker waits before reading again after the
// Store failed.
const brokerRetry = time.Second

// broker fans the events committed to the Store out to the open event
// streams and the webhook workers. It works from the Store interface alone:
// one goroutine reads the outbox in sequence order after each commit made
// through the Service (see [Service.update]) and, when polling is on, every
// poll interval, so that events committed by other processes sharing the
// Store reach the streams too.
//
// What it reads goes into the ring of a [fanout.Hub], each event encoded
// once as its SSE frame and shared by every reader, so that memory is
// bounded by the ring however many streams there are and however slow. A
// stream whose position has left the ring is cut off (it resumes from its
// cursor), as is one whose write blocks longer than the write timeout,
// without holding up the others.
type broker struct {
	hub       *fanout.Hub[ringEvent]
	maxPerKey int
}

// newBroker returns the broker of cfg: it keeps the last StreamLagLimit
// events and reads nothing until the first stream opens.
func newBroker(cfg *Config) *broker {
	store, log := cfg.Store, cfg.Logger
	return &broker{maxPerKey: cfg.MaxStreamsPerKey, hub: fanout.New(fanout.Config[ringEvent]{
		Size:      cfg.StreamLagLimit,
		Page:      min(brokerPage, max(1, cfg.StreamLagLimit/4)),
		MaxPerKey: cfg.MaxStreamsPerKey,
		Poll:      cfg.EventPollInterval,
		Retry:     brokerRetry,
		Window:    cfg.StreamBatchWindow,
		After:     cfg.Clock.After,
		Start: func(ctx context.Context) (int64, error) {
			bounds, err := store.EventBounds(ctx)
			if err != nil {
				return 0, fmt.Errorf("start event broker: %w", err)
			}
			return bounds.Last, nil
		},
		Load: func(ctx context.Context, after int64, limit int) ([]ringEvent, error) {
			evs, err := store.Events(ctx, EventFilter{After: after, Limit: limit})
			if err != nil || len(evs) == 0 {
				return nil, err
			}
			batch := make([]ringEvent, len(evs))
			for i := range evs {
				batch[i] = newRingEvent(&evs[i], log)
			}
			return batch, nil
		},
		Seq: func(e *ringEvent) int64 { return e.seq },
		Failed: func(after int64, err error) {
			log.Error("event broker: read events", "after", after, "err", err)
		},
	})}
}

// wake tells the broker that events may have been committed. It never
// blocks; wake-ups that come while one is pending are merged.
func (b *broker) wake() { b.hub.Wake() }

// acquire registers a stream of the principal key, starting the broker if
// it is the first. It returns a *RateLimitError when key already holds the
// most streams allowed, and an error matching ErrClosed after the hub's
// Close. Every successful acquire must be followed by one hub.Release.
func (b *broker) acquire(ctx context.Context, key string) error {
	err := b.hub.Acquire(ctx, key)
	switch {
	case errors.Is(err, fanout.ErrClosed):
		return fmt.Errorf("open event stream: %w", ErrClosed)
	case errors.Is(err, fanout.ErrLimit):
		return &RateLimitError{
			RetryAfterSeconds: streamRetryAfter,
			Message:           fmt.Sprintf("This API key already holds %d open event streams, the most allowed; close one or retry later", b.maxPerKey),
		}
	}
	return err
}

// start starts the broker if it has not started yet, for a reader other
// than a stream (the webhook dispatcher).
func (b *broker) start(ctx context.Context) error {
	err := b.hub.Start(ctx)
	if errors.Is(err, fanout.ErrClosed) {
		return fmt.Errorf("start event broker: %w", ErrClosed)
	}
	return err
}

// events appends to dst the buffered events after pos that keep keeps, at
// most limit of them (see fanout.Scan).
func (b *broker) events(pos int64, keep func(*ringEvent) bool, dst []ringEvent, limit int) (evs []ringEvent, next int64, changed <-chan struct{}, ok bool) {
	return fanout.Scan(b.hub, pos, dst, limit, keep, func(e *ringEvent) ringEvent { return *e })
}

// ringEvent is an event held by the ring: what filters need, its frame and
// its envelope. Its byte slices are never written once made.
type ringEvent struct {
	seq     int64
	typ     EventType
	id      string
	taskID  string
	project string
	frame   []byte    // the SSE frame
	body    []byte    // the envelope JSON, within frame: a webhook's body
	at      time.Time // when the change was committed (its occurredAt)
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
		frame: frame, body: frame[start : len(frame)-2 : len(frame)-2], at: e.OccurredAt.Time}
}
