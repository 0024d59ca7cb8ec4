package sse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Batch is the most frames a live stream writes at once.
const Batch = 256

// moveAfter is how long, by the wall clock, a stream that parks stays on
// the goroutine that wrote, idle, before it parks (see Stream.run).
const moveAfter = 250 * time.Millisecond

// errMove tells the goroutine of a stream that parks to park it (see
// serveParking).
var errMove = errors.New("sse: park the stream")

// keepaliveLayout is how a heartbeat tells the time: RFC 3339 in UTC with
// milliseconds.
const keepaliveLayout = "2006-01-02T15:04:05.000Z07:00"

// Clock tells the time and waits for it: heartbeats are timed by it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// A WallClock is a Clock that tells the wall clock's time, as the
// system's does. Only a stream whose Clock is one parks (see Parker): a
// parked stream times its heartbeat with the socket's read deadline.
type WallClock interface {
	Clock
	// IsWall marks the Clock as the wall clock.
	IsWall()
}

// A Parker is a Feed on which an idle stream can wait with nothing but
// the goroutine that reads its connection: a stream served on a
// connection taken over, with a WallClock, that has written nothing for a
// while, parks. It registers to be woken, and waits reading the client's
// connection (which tells it when the client leaves) until woken or its
// heartbeat is due; then it carries on where it left off.
type Parker interface {
	// Parks reports whether the stream may park: false when the Feed
	// cannot wake it on all it waits for. The stream is then served as
	// without parking, with a goroutine that watches the client.
	Parks() bool
	// Park registers wake, to be called once, from any goroutine, when
	// items the stream carries arrive after pos, when the stream's Stop
	// or Done is closed, or when the parent context given to Run is done.
	// It returns the function that unregisters wake and returns the
	// position the stream goes on from: pos, or later when items it does
	// not carry came after pos. ok is false, and wake is not registered,
	// when one of these has happened already: the stream then reads on.
	Park(pos int64, wake func()) (unpark func() int64, ok bool)
}

// A Feed is what a Stream carries: items numbered by increasing
// sequences, read from a shared buffer of the newest ones while the stream
// keeps up, and from where they are stored (a page of type P at a time)
// when it starts behind the buffer.
type Feed[P any] interface {
	// Read appends to dst the frames of the buffered items after pos that
	// the stream carries, at most limit of them, and returns them with the
	// sequence read through and a channel that is closed when more items
	// arrive. ok is false when the buffer no longer holds every item after
	// pos.
	Read(pos int64, dst [][]byte, limit int) (frames [][]byte, next int64, changed <-chan struct{}, ok bool)
	// Fetch reads the page of stored items after the sequence after. It is
	// called on a goroutine of its own (see OffStack), while the stream
	// writes the page before.
	Fetch(ctx context.Context, after int64) (Page[P], error)
	// Append appends to dst the frames of the items of a page.
	Append(ctx context.Context, dst []byte, items P) []byte
	// Behind returns the error that ends a stream that followed the buffer
	// and fell out of it, having read through pos.
	Behind(pos int64) error
	// End returns the last thing a stream writes when one of its ends comes
	// (stopped: its Stop channel closed; else its Done channel closed or
	// its ExpiresAt came), and the error it ends with.
	End(stopped bool) (last []byte, err error)
	// Ended is told why the stream ended (see Stream.Serve); ctx is the
	// stream's context.
	Ended(ctx context.Context, err error)
	// Release is called once, after Ended, when Run has let go of the
	// stream's connection.
	Release()
}

// A Page is a page of stored items read by Feed.Fetch.
type Page[P any] struct {
	Items P
	// N is how many items Items holds, and Last the sequence of the last
	// one when N > 0.
	N    int
	Last int64
	// Full is set when there may be more stored items after Last.
	Full bool
	// Through is the buffer's position before the read: every item up to
	// it had been committed, so a page that is not full holds every item
	// up to it that the stream carries.
	Through int64
}

// Stream is one open event stream: its Conn, the sequence it has written
// through, its heartbeat and what ends it.
type Stream[P any] struct {
	Conn
	// Pos is the sequence read through: every item the stream carries
	// with a sequence up to Pos has been written.
	Pos int64
	// Heartbeat is how long the stream may stay silent: after that it
	// writes a keepalive comment.
	Heartbeat time.Duration
	// Clock times the heartbeats.
	Clock Clock
	// Stop ends the stream when closed, Done when closed (see Feed.End).
	// nil: never.
	Stop <-chan struct{}
	Done <-chan struct{}
	// ExpiresAt, by Clock, ends the stream as Done does. Zero: never.
	ExpiresAt time.Time

	lastWrite time.Time        // by Clock, for heartbeats
	beatC     <-chan time.Time // fires when the heartbeat may be due
	frames    [][]byte         // reused between reads of the buffer
	buf       []byte           // reused frame encoding buffer of replay
	kicked    atomic.Bool      // a parked stream was woken
	// live is set once the stream reads from the buffer; falling out of
	// the buffer afterwards ends it.
	live  bool
	parks bool // served on goroutines of its own that park it (run may return errMove)
	woke  bool // run is called back from parking
}

// Write writes chunks and flushes them, like Conn.Write, and counts the
// stream as not idle from now on.
func (s *Stream[P]) Write(chunks ...[]byte) error {
	// Idle time counts from when a write starts: a client may read the
	// bytes before the write returns.
	s.lastWrite = s.Clock.Now()
	return s.Conn.Write(chunks...)
}

// WriteHead sends the status and headers of the stream, like
// Conn.WriteHead.
func (s *Stream[P]) WriteHead() error {
	s.lastWrite = s.Clock.Now()
	return s.Conn.WriteHead()
}

// Run serves the stream of the request r: when takeOver is set, on the
// connection taken over from net/http (see Conn.TakeOver) from goroutines
// of its own, returning at once, and parking while idle when f is a
// Parker and s.Clock a WallClock; otherwise, or when the connection
// cannot be taken over, inside the handler until the stream ends. Either
// way the stream ends when parent is done or the client leaves, f.Ended is
// told why, and f.Release is called once the connection is let go of.
func (s *Stream[P]) Run(r *http.Request, parent context.Context, unwrap func(net.Conn) net.Conn, takeOver bool, f Feed[P]) {
	if takeOver {
		p, parker := f.(Parker)
		_, wall := s.Clock.(WallClock)
		if parker && wall && p.Parks() {
			if s.hijack(r, unwrap) {
				s.parks = true
				go s.startParking(parent, f)
				return
			}
		} else if ctx, ok := s.TakeOver(r, parent, unwrap); ok {
			go s.serveTakenOver(ctx, f)
			return
		}
	}
	defer f.Release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(parent, cancel)()
	f.Ended(ctx, s.Serve(ctx, f))
}

// serveTakenOver serves, on a goroutine of its own, a stream whose
// connection was taken over with a goroutine watching the client (see
// Conn.TakeOver): one that cannot park.
func (s *Stream[P]) serveTakenOver(ctx context.Context, f Feed[P]) {
	defer f.Release()
	defer s.Close()
	f.Ended(ctx, s.Serve(ctx, f))
}

// errClientLeft ends a parked stream whose client closed its connection.
var errClientLeft = errors.New("sse: the client left")

// serveParking carries on serving a stream whose connection was taken
// over, after run returned err, until it ends: when run asks to move
// (errMove), the stream parks, registering to be woken (see Parker), and
// waits on a fresh goroutine (parked), whose stack is the smallest, as
// the goroutine that wrote ends. ctx is Run's parent: the stream has no
// context of its own, as no watcher of the client cancels one; a stream
// whose client left ends with a context cancelled then, as Feed.Ended
// expects.
func (s *Stream[P]) serveParking(ctx context.Context, f Feed[P], err error) {
	for err == errMove {
		if unpark, ok := f.(Parker).Park(s.Pos, s.kick); ok {
			// Let go of what a waiting goroutine needed.
			s.beatC, s.frames = nil, nil
			go s.parked(ctx, f, unpark)
			return
		}
		// Something came already: read on, and park again at once if it
		// was nothing to write.
		s.woke = true
		err = s.run(ctx, f)
	}
	defer f.Release()
	defer s.Close()
	if err == errClientLeft {
		left, cancel := context.WithCancel(ctx)
		cancel()
		ctx, err = left, left.Err()
	}
	f.Ended(ctx, err)
}

// startParking serves a stream whose connection was taken over, from the
// response head, on goroutines of its own that park it while idle.
func (s *Stream[P]) startParking(ctx context.Context, f Feed[P]) {
	s.serveParking(ctx, f, s.Serve(ctx, f))
}

// parked waits for the parked stream's wake-up (awaitWake), then carries
// on serving it.
func (s *Stream[P]) parked(ctx context.Context, f Feed[P], unpark func() int64) {
	err := s.awaitWake()
	s.Pos = max(s.Pos, unpark())
	if err == nil {
		s.kicked.Store(false)
		if err = s.conn.SetReadDeadline(time.Time{}); err != nil {
			err = fmt.Errorf("%w: clear the read deadline: %w", ErrWrite, err)
		} else {
			s.woke = true
			err = s.run(ctx, f)
		}
	}
	s.serveParking(ctx, f, err)
}

// awaitWake reads the connection until the stream is kicked (by a
// wake-up of Park, which sets kicked, then a read deadline in the past),
// its heartbeat or expiry is due (the read deadline set here), or the
// client leaves (errClientLeft). Whatever the client sends is discarded.
func (s *Stream[P]) awaitWake() error {
	due := s.lastWrite.Add(s.Heartbeat)
	if !s.ExpiresAt.IsZero() && s.ExpiresAt.Before(due) {
		due = s.ExpiresAt
	}
	if err := s.conn.SetReadDeadline(due); err != nil {
		return errClientLeft
	}
	var b [16]byte
	for !s.kicked.Load() { // checked after the deadline is set: a kick then is not lost
		_, err := s.conn.Read(b[:])
		switch {
		case err == nil:
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return errClientLeft
		case !s.Clock.Now().Before(due):
			return nil // the heartbeat or the expiry is due
		case !s.kicked.Load():
			// The deadline in the past of a wake-up of an earlier
			// parking, which came late: set this one's again.
			if err := s.conn.SetReadDeadline(due); err != nil {
				return errClientLeft
			}
		}
	}
	return nil
}

// kick wakes the parked stream: the wake function of Park.
func (s *Stream[P]) kick() {
	s.kicked.Store(true)
	_ = s.conn.SetReadDeadline(aLongTimeAgo)
}

// aLongTimeAgo is a read deadline that has passed: it ends a read at once.
var aLongTimeAgo = time.Unix(1, 0)

// Serve sends the response head, then what f carries, until ctx is done, a
// write fails, the stream falls too far behind or one of its ends comes.
// It returns why the stream ended: ctx's error, an error matching ErrWrite,
// or an error of f.
//
// The stream's goroutine waits here for as long as the stream lasts, so
// the frames of Serve and run are kept small (the head, the heartbeat and
// replay live in functions of their own): writes then fit in the smallest
// goroutine stack, which halves an idle stream's memory over HTTP/2.
func (s *Stream[P]) Serve(ctx context.Context, f Feed[P]) error {
	if err := s.WriteHead(); err != nil {
		return err
	}
	return s.run(ctx, f)
}

// run writes what f carries until the stream ends. A stream that parks
// returns errMove once it has written nothing for moveAfter, and at once
// when woken from parking with nothing to write (see serveParking): it
// carries on where it left off.
func (s *Stream[P]) run(ctx context.Context, f Feed[P]) error {
	woke := s.woke
	s.woke = false
	if s.beatC == nil {
		// At the start, or back from parking: a heartbeat may be due.
		var err error
		if s.beatC, err = s.beat(); err != nil {
			return err
		}
	}
	since := s.lastWrite
	var move <-chan time.Time // armed at the first wait of a stream that parks
	var expires <-chan time.Time
	if !s.ExpiresAt.IsZero() {
		expires = s.Clock.After(s.ExpiresAt.Sub(s.Clock.Now()))
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-s.Stop:
			return s.end(f, true)
		case <-s.Done:
			return s.end(f, false)
		case <-expires:
			return s.end(f, false)
		default:
		}
		frames, next, changed, ok := f.Read(s.Pos, s.frames[:0], Batch)
		if !ok {
			if s.live {
				return f.Behind(s.Pos)
			}
			if err := s.replay(ctx, f); err != nil {
				return err
			}
			continue
		}
		s.live = true
		s.Pos = next
		s.frames = frames
		if len(frames) > 0 {
			err := s.Write(frames...)
			clear(frames) // let the buffer's frames go
			if cap(frames) > 16 {
				s.frames = nil // a burst's worth is not kept while idle
			}
			if err != nil {
				return err
			}
			if len(frames) == Batch {
				continue // there may be more already
			}
		}
		if woke && s.lastWrite == since {
			return errMove // woken from parking with nothing to write: park again
		}
		if s.parks && move == nil {
			move = time.After(moveAfter - s.Clock.Now().Sub(s.lastWrite))
		}
		// changed was taken with the frames: it is already closed if
		// items came in since.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Stop:
			return s.end(f, true)
		case <-s.Done:
			return s.end(f, false)
		case <-expires:
			return s.end(f, false)
		case <-changed:
		case <-s.beatC:
			var err error
			if s.beatC, err = s.beat(); err != nil {
				return err
			}
		case <-move:
			// A stream that writes often stays on its goroutine.
			if idle := s.Clock.Now().Sub(s.lastWrite); idle < moveAfter {
				move = time.After(moveAfter - idle)
				continue
			}
			return errMove
		}
	}
}

// end writes the last thing f has the stream write when one of its ends
// comes, and returns the error f ends it with.
func (s *Stream[P]) end(f Feed[P], stopped bool) error {
	last, err := f.End(stopped)
	if werr := s.Write(last); werr != nil {
		return werr
	}
	return err
}

// beat writes a keepalive comment when the stream has been idle for the
// heartbeat, and returns when to look again.
func (s *Stream[P]) beat() (<-chan time.Time, error) {
	now := s.Clock.Now()
	if idle := now.Sub(s.lastWrite); idle < s.Heartbeat {
		return s.Clock.After(s.Heartbeat - idle), nil
	}
	c := append(make([]byte, 0, 48), ": keepalive "...)
	c = now.UTC().AppendFormat(c, keepaliveLayout)
	if err := s.Write(append(c, "\n\n"...)); err != nil {
		return nil, err
	}
	return s.Clock.After(s.Heartbeat), nil
}

// replay writes the stored items after Pos that f carries, up to the
// newest, and leaves Pos where the buffer can take over. It reads the next
// page while it writes the current one.
func (s *Stream[P]) replay(ctx context.Context, f Feed[P]) error {
	page := fetch(ctx, f, s.Pos)
	for {
		res := <-page
		if res.err != nil {
			return res.err
		}
		p := res.page
		if p.Full {
			page = fetch(ctx, f, p.Last)
		}
		if p.N > 0 {
			s.buf = f.Append(ctx, s.buf[:0], p.Items)
			if err := s.Write(s.buf); err != nil {
				return err
			}
			s.Pos = p.Last
		}
		if !p.Full {
			s.Pos = max(s.Pos, p.Through)
			s.buf = nil // a page of frames: not kept while live
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// fetched is the result of a Feed.Fetch.
type fetched[P any] struct {
	page Page[P]
	err  error
}

// fetch calls f.Fetch on a goroutine of its own (see OffStack) and
// delivers its result on the returned channel.
func fetch[P any](ctx context.Context, f Feed[P], after int64) <-chan fetched[P] {
	ch := make(chan fetched[P], 1)
	go func() {
		p, err := f.Fetch(ctx, after)
		ch <- fetched[P]{p, err}
	}()
	return ch
}

// OffStack runs f on a goroutine of its own and returns its results. A
// stream's goroutine lives as long as the stream, and a goroutine stack
// that has grown stays grown unless it becomes mostly unused, which a
// waiting stream's is not. Calls that run deep (database/sql, cgo) are
// made here, so that an idle stream keeps the smallest stack.
func OffStack[T any](f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// Comment returns the comment text makes, on one line (its line breaks
// made spaces), ending like an event: what a client does not show.
func Comment(text string) []byte {
	return []byte(": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(text) + "\n\n")
}

// AppendHead appends to dst the fields of a frame that come before its
// data: the retry delay in milliseconds, the id and the event name, then
// "data: ". The caller appends the data, on one line, and "\n\n".
func AppendHead(dst []byte, retryMillis int, id, event string) []byte {
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, int64(retryMillis), 10)
	dst = append(dst, "\nid: "...)
	dst = append(dst, id...)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, event...)
	return append(dst, "\ndata: "...)
}
