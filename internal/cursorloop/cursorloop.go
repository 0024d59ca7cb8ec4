// Package cursorloop runs the loop of a worker that delivers, at least
// once, the items of a sequenced feed after a stored cursor, with the
// retries of earlier deliveries as they come due. It records outcomes and
// moves the cursor in one step: deliveries that succeeded at first try are
// recorded together, after a short delay or once a batch has gathered;
// anything else (a failure, a retry) before the worker goes on; a cursor
// moved past items with nothing to deliver is stored now and then. Between
// rounds it waits for more items, the next retry, a record that is due, or
// a poke. What is read, delivered and recorded is the caller's Worker.
package cursorloop

import (
	"context"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/backoff"
)

// Clock tells the time and waits for it.
type Clock = backoff.Clock

// Worker reads, delivers and records for the loop. Only the loop's
// goroutine calls it.
type Worker interface {
	// Due reads the retries due at now and keeps them for Deliver. It
	// returns how many, and when the next one not yet due is (the zero
	// time: none).
	Due(ctx context.Context, now time.Time) (n int, next time.Time, err error)
	// Read reads the items after pos and keeps those to deliver for
	// Deliver. It returns how many, the position read through, and a
	// channel closed when more items arrive (nil when more may be waiting
	// at once).
	Read(ctx context.Context, pos int64) (n int, next int64, changed <-chan struct{}, err error)
	// Deliver delivers the retries and items last kept, keeps their
	// outcomes for Record, and returns how many it made and whether any
	// failed.
	Deliver(ctx context.Context) (n int, failed bool)
	// Record stores the outcomes kept and the cursor pos together, then
	// forgets those outcomes. It returns when the earliest retry it
	// scheduled is due (the zero time: none), and, when the cursor was
	// moved back meanwhile (a replay), where the loop reads on from.
	Record(ctx context.Context, pos int64) (retryAt time.Time, rewound *int64, err error)
}

// Failure says which step of the loop failed.
type Failure int

// The steps that fail.
const (
	// Round: reading, delivering or recording in a round; the loop tries
	// again after RetryWait.
	Round Failure = iota
	// Flush: recording while idle; tried again at the next round.
	Flush
	// FinalDeliveries: recording deliveries as the loop stops; they will
	// be delivered again.
	FinalDeliveries
	// FinalCursor: storing the cursor as the loop stops; the items after
	// it will be read again.
	FinalCursor
)

// Config says how the loop runs.
type Config struct {
	// Clock times retries, the cursor's storing and RetryWait.
	Clock Clock
	// Cursor is where reading starts: the cursor as stored.
	Cursor int64
	// Poked says a record is due before anything is delivered (the
	// cursor was moved back before the worker started).
	Poked bool
	// Poke receives when the worker's retries or cursor were changed
	// from outside: the loop records, and reads its retries again.
	Poke <-chan struct{}
	// Batch is the most items Read and Due return; that many unrecorded
	// deliveries are recorded at once.
	Batch int
	// RecordDelay is the longest deliveries that succeeded at first try
	// wait to be recorded (wall-clock time).
	RecordDelay time.Duration
	// CursorLag is how far the cursor may move past items with nothing to
	// deliver before it is stored; CursorDelay the longest it stays
	// unstored.
	CursorLag   int64
	CursorDelay time.Duration
	// RetryWait is how long the loop waits after a failed round.
	RetryWait time.Duration
	// StopTimeout bounds the last record, made as the loop stops.
	StopTimeout time.Duration
	// Ends reports whether an error of the Worker ends the loop.
	Ends func(err error) bool
	// Stopped is told why the loop stopped when an error ended it.
	Stopped func(reason error)
	// Failed is told of every other failure.
	Failed func(step Failure, err error)
}

// Run delivers until ctx ends or an error of the Worker ends the loop,
// then records what was delivered, so that it is not delivered again, and
// how far the items were read. Until recorded, the cursor stays before
// the items delivered: if the process dies, they are delivered again.
func Run(ctx context.Context, c Config, w Worker) {
	pos := c.Cursor
	// Retries are added by the worker itself, and from outside with a
	// poke; so the loop knows when the next is due and reads them only
	// then.
	retriesKnown := false
	var nextRetry time.Time // the zero time: none pending

	unrecorded := 0              // deliveries made, not yet recorded
	recorded := pos              // the cursor as stored
	var recordBy time.Time       // when unrecorded must be recorded, by the wall clock
	var cursorBy time.Time       // when a cursor moved past items not delivered must be stored, by c.Clock
	var cursorC <-chan time.Time // fires at cursorBy; nil when the cursor is stored
	recordTimer := time.NewTimer(time.Hour)
	recordTimer.Stop()
	defer recordTimer.Stop()
	poked := c.Poked
	flush := func(ctx context.Context) error {
		if unrecorded == 0 && pos == recorded && !poked {
			return nil
		}
		retryAt, rewound, err := w.Record(ctx, pos)
		if err != nil {
			return err
		}
		if !retryAt.IsZero() && (nextRetry.IsZero() || retryAt.Before(nextRetry)) {
			nextRetry = retryAt
		}
		unrecorded, recorded, cursorBy, cursorC, poked = 0, pos, time.Time{}, nil, false
		if rewound != nil {
			pos, recorded = *rewound, *rewound
		}
		return nil
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.StopTimeout)
		defer cancel()
		step := FinalCursor
		if unrecorded > 0 {
			step = FinalDeliveries
		}
		if err := flush(fctx); err != nil && !c.Ends(err) {
			c.Failed(step, err)
		}
	}()

	for ctx.Err() == nil {
		select {
		case <-c.Poke: // busy: not waiting below
			poked, retriesKnown = true, false
		default:
		}
		now := c.Clock.Now()
		due := 0
		var err error
		if (unrecorded > 0 && !retriesKnown) || poked {
			// The last record failed: until what was delivered is
			// recorded, nothing else is read or sent, so that a retry
			// whose outcome is not recorded is not sent again. Or a poke:
			// the cursor may have moved back.
			err = flush(ctx)
		}
		if err == nil && (!retriesKnown || (!nextRetry.IsZero() && !now.Before(nextRetry))) {
			due, nextRetry, err = w.Due(ctx, now)
			retriesKnown = err == nil && due < c.Batch
		}
		read, next := 0, pos
		var changed <-chan struct{}
		if err == nil {
			read, next, changed, err = w.Read(ctx, pos)
		}
		if err == nil && (due > 0 || read > 0) {
			made, failed := w.Deliver(ctx)
			if ctx.Err() != nil {
				return // abandoned: what was not recorded is delivered again
			}
			pos = next
			unrecorded += made
			if unrecorded == made {
				recordBy = time.Now().Add(c.RecordDelay)
			}
			if due > 0 || unrecorded >= c.Batch || failed || !time.Now().Before(recordBy) {
				err = flush(ctx)
			}
		} else if err == nil && next != pos {
			// Nothing to deliver: the cursor moves past items not
			// delivered, and is stored now and then.
			pos = next
			if cursorC == nil {
				cursorBy, cursorC = now.Add(c.CursorDelay), c.Clock.After(c.CursorDelay)
			}
			if pos-recorded >= c.CursorLag || !now.Before(cursorBy) {
				err = flush(ctx)
			}
		}
		switch {
		case err != nil && c.Ends(err):
			c.Stopped(err)
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			retriesKnown = false
			c.Failed(Round, err)
			backoff.Pause(ctx, c.Clock, c.RetryWait)
			continue
		}
		if due > 0 || read > 0 || changed == nil {
			continue // there may be more at once
		}
		var retryC <-chan time.Time
		if !nextRetry.IsZero() {
			retryC = c.Clock.After(nextRetry.Sub(c.Clock.Now()))
			// The clock may have passed nextRetry between reading it and
			// setting the timer.
			if !c.Clock.Now().Before(nextRetry) {
				continue
			}
		}
		var recordC <-chan time.Time
		if unrecorded > 0 {
			recordTimer.Reset(time.Until(recordBy))
			recordC = recordTimer.C
		}
		record := false
		select {
		case <-ctx.Done():
		case <-changed:
		case <-retryC:
		case <-cursorC:
			// Stored again after RetryWait if this fails; a success drops
			// the timer.
			record, cursorC = true, c.Clock.After(c.RetryWait)
		case <-recordC:
			record = true
		case <-c.Poke:
			poked, retriesKnown = true, false
		}
		if record {
			if err := flush(ctx); err != nil {
				if c.Ends(err) {
					c.Stopped(err)
					return
				}
				if ctx.Err() == nil {
					c.Failed(Flush, err)
				}
			}
		}
		recordTimer.Stop()
	}
}
