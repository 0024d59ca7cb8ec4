package sse

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Batch is the most frames a live stream writes at once.
const Batch = 256

// moveAfter is how long, by the wall clock, a stream served on a
// connection taken over stays on the goroutine that wrote, before it moves
// to a fresh one (see Stream.run).
const moveAfter = 250 * time.Millisecond

// errMove tells the goroutine of a taken-over stream to hand the stream to
// a fresh goroutine.
var errMove = errors.New("sse: move the stream to a fresh goroutine")

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
	// its Expires channel fired), and the error it ends with.
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
	// Stop ends the stream when closed, Done and Expires when closed or
	// fired (see Feed.End). nil: never.
	Stop    <-chan struct{}
	Done    <-chan struct{}
	Expires <-chan time.Time

	// live is set once the stream reads from the buffer; falling out of
	// the buffer afterwards ends it.
	live      bool
	lastWrite time.Time        // by Clock, for heartbeats
	beatC     <-chan time.Time // fires when the heartbeat may be due
	movable   bool             // served from goroutines of its own: run may return errMove
	frames    [][]byte         // reused between reads of the buffer
	buf       []byte           // reused frame encoding buffer of replay
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
// of its own, returning at once; otherwise, or when the connection cannot
// be taken over, inside the handler until the stream ends. Either way the
// stream ends when parent is done or the client leaves, f.Ended is told
// why, and f.Release is called once the connection is let go of.
func (s *Stream[P]) Run(r *http.Request, parent context.Context, unwrap func(net.Conn) net.Conn, takeOver bool, f Feed[P]) {
	if takeOver {
		if ctx, ok := s.TakeOver(r, parent, unwrap); ok {
			s.movable = true
			go s.serveTakenOver(ctx, f, true)
			return
		}
	}
	defer f.Release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(parent, cancel)()
	f.Ended(ctx, s.Serve(ctx, f))
}

// serveTakenOver serves a stream whose connection was taken over, from
// the head when head is set, and moves it to a fresh goroutine whenever
// run asks: a goroutine's stack grows when it writes (the system call,
// the Feed's telemetry) and, once grown, never shrinks while the stream
// waits, so a stream that has written nothing for moveAfter waits on a
// goroutine with the smallest stack instead.
func (s *Stream[P]) serveTakenOver(ctx context.Context, f Feed[P], head bool) {
	var err error
	if head {
		err = s.Serve(ctx, f)
	} else {
		err = s.run(ctx, f, false)
	}
	if err == errMove {
		go s.serveTakenOver(ctx, f, false)
		return
	}
	defer f.Release()
	defer s.Close()
	f.Ended(ctx, err)
}

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
	return s.run(ctx, f, true)
}

// run writes what f carries until the stream ends. A movable stream that
// wrote returns errMove moveAfter later (see serveTakenOver): it carries
// on, on a fresh goroutine, where it left off.
//
// wrote says that this goroutine has written already (the head).
func (s *Stream[P]) run(ctx context.Context, f Feed[P], wrote bool) error {
	if s.beatC == nil {
		s.beatC = s.Clock.After(s.Heartbeat)
	}
	var move <-chan time.Time // armed once this goroutine has written
	if wrote && s.movable {
		move = time.After(moveAfter)
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
		case <-s.Expires:
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
			if move == nil && s.movable {
				move = time.After(moveAfter)
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
			if move == nil && s.movable {
				move = time.After(moveAfter)
			}
			if len(frames) == Batch {
				continue // there may be more already
			}
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
		case <-s.Expires:
			return s.end(f, false)
		case <-changed:
		case <-s.beatC:
			var err error
			if s.beatC, err = s.beat(); err != nil {
				return err
			}
			if move == nil && s.movable {
				move = time.After(moveAfter) // it may have written a keepalive
			}
		case <-move:
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
