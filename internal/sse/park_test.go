package sse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// wallClock is the system's clock, marked as the wall clock.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (wallClock) IsWall()                                {}

// parkFeed is a feed on which a stream parks: Park registers the wake-up
// on the feed's items, on the stream's end (stop) and on the parent
// context, and reports each parking.
type parkFeed struct {
	*feed
	parent context.Context
	parked chan struct{} // receives at each parking

	parks  bool // what Parks reports
	refuse int  // Park calls to refuse, as if something had come

	wmu    sync.Mutex
	wakes  map[int]func()
	next   int
	skipTo int64 // items up to it are none the stream carries

	ends chan ending // what Ended was told
}

// ending is what Feed.Ended was told.
type ending struct {
	ctx context.Context
	err error
}

func newParkFeed(parent context.Context) *parkFeed {
	return &parkFeed{feed: newFeed(10, 0, 0), parent: parent, parked: make(chan struct{}, 16), wakes: map[int]func(){}, ends: make(chan ending, 1), parks: true}
}

func (f *parkFeed) Parks() bool { return f.parks }

func (f *parkFeed) Park(pos int64, wake func()) (func() int64, bool) {
	f.feed.mu.Lock()
	stored := f.feed.stored
	f.feed.mu.Unlock()
	if stored > pos && f.skipTo < stored || f.parent.Err() != nil {
		return nil, false
	}
	f.wmu.Lock()
	if f.refuse > 0 {
		f.refuse--
		f.wmu.Unlock()
		return nil, false
	}
	id := f.next
	f.next++
	f.wakes[id] = wake
	f.wmu.Unlock()
	stopCtx := context.AfterFunc(f.parent, wake)
	f.parked <- struct{}{}
	return func() int64 {
		stopCtx()
		f.wmu.Lock()
		defer f.wmu.Unlock()
		delete(f.wakes, id)
		return max(pos, f.skipTo)
	}, true
}

// wake calls the wake-ups registered, as the feed's items or the
// stream's end would.
func (f *parkFeed) wake() {
	f.wmu.Lock()
	wakes := f.wakes
	f.wakes = map[int]func(){}
	f.wmu.Unlock()
	for _, w := range wakes {
		w()
	}
}

// add adds n items and wakes the parked streams.
func (f *parkFeed) add(n int64) {
	f.feed.add(n)
	f.wake()
}

// other wakes the parked streams with nothing for them: as a change of
// the Stop or Done channels they were not closed by would.
func (f *parkFeed) other() { f.wake() }

// skip stores n items the stream does not carry: the feed moves the
// position of parked streams past them, without waking them.
func (f *parkFeed) skip(n int64) {
	f.feed.mu.Lock()
	f.feed.stored += n
	stored := f.feed.stored
	f.feed.mu.Unlock()
	f.wmu.Lock()
	f.skipTo = stored
	f.wmu.Unlock()
}

func (f *parkFeed) Ended(ctx context.Context, err error) {
	f.ends <- ending{ctx, err}
}

// parkedStream is a stream served on a taken-over connection of a real
// server, read by a client.
type parkedStream struct {
	t      *testing.T
	f      *parkFeed
	conn   net.Conn
	br     *bufio.Reader
	stop   chan struct{}
	cancel context.CancelFunc
}

func newParkedStream(t *testing.T, heartbeat time.Duration, mutate ...func(*parkFeed)) *parkedStream {
	t.Helper()
	parent, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &parkedStream{t: t, f: newParkFeed(parent), stop: make(chan struct{}), cancel: cancel}
	for _, m := range mutate {
		m(p.f)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &Stream[[]int64]{Conn: NewConn(w, time.Second), Heartbeat: heartbeat, Clock: wallClock{}, Stop: p.stop}
		SetHeaders(s.Header())
		s.Run(r, parent, nil, true, p.f)
	}))
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprint(conn, "GET /stream HTTP/1.1\r\nHost: example.com\r\n\r\n")
	p.conn, p.br = conn, bufio.NewReader(conn)
	for { // the head
		line, err := p.br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	return p
}

// next reads the next frame (up to its blank line, or its line for the
// test feed's items).
func (p *parkedStream) next() string {
	p.t.Helper()
	p.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	line, err := p.br.ReadString('\n')
	if err != nil {
		p.t.Fatalf("read: %v", err)
	}
	if strings.HasPrefix(line, ":") {
		p.br.ReadString('\n') // a comment's blank line
	}
	return line
}

// awaitParked waits for the stream to park.
func (p *parkedStream) awaitParked() {
	p.t.Helper()
	select {
	case <-p.f.parked:
	case <-time.After(waitTimeout):
		p.t.Fatal("the stream did not park")
	}
}

// awaitEnded waits for the stream to end and returns why, with the
// context Ended was told.
func (p *parkedStream) awaitEnded() (context.Context, error) {
	p.t.Helper()
	select {
	case e := <-p.f.ends:
		return e.ctx, e.err
	case <-time.After(waitTimeout):
		p.t.Fatal("the stream did not end")
		return nil, nil
	}
}

// TestParkedStream: an idle stream on a taken-over connection parks, is
// woken by items (and woken for nothing by items it does not carry, when
// it parks again), sends its heartbeat while parked, and ends when the
// client leaves, when stopped or when its parent context ends.
func TestParkedStream(t *testing.T) {
	t.Parallel()
	t.Run("items", func(t *testing.T) {
		t.Parallel()
		p := newParkedStream(t, time.Minute)
		p.awaitParked()
		p.f.add(1)
		if got := p.next(); got != "1\n" {
			t.Fatalf("frame %q, want 1", got)
		}
		p.awaitParked()
		p.f.other()
		p.awaitParked() // at once: it wrote nothing
		p.f.add(2)
		if got := p.next() + p.next(); got != "2\n3\n" {
			t.Fatalf("frames %q, want 2 and 3", got)
		}
		p.awaitParked()
		p.f.skip(5) // items 4 to 8, not the stream's: not woken
		p.f.add(1)
		if got := p.next(); got != "9\n" {
			t.Fatalf("frame %q, want 9: past the items skipped", got)
		}
	})
	t.Run("heartbeat", func(t *testing.T) {
		t.Parallel()
		p := newParkedStream(t, 600*time.Millisecond)
		p.awaitParked()
		if got := p.next(); !strings.HasPrefix(got, ": keepalive ") {
			t.Fatalf("frame %q, want a keepalive", got)
		}
		p.awaitParked()
		p.f.add(1)
		if got := p.next(); got != "1\n" {
			t.Fatalf("frame %q, want 1", got)
		}
	})
	t.Run("client leaves", func(t *testing.T) {
		t.Parallel()
		p := newParkedStream(t, time.Minute)
		p.awaitParked()
		p.conn.Close()
		ctx, err := p.awaitEnded()
		if !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			t.Fatalf("ended with %v, context %v; want cancelled", err, ctx.Err())
		}
	})
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		p := newParkedStream(t, time.Minute)
		p.awaitParked()
		close(p.stop)
		p.f.wake()
		if got := p.next(); got != ": stopped\n" {
			t.Fatalf("frame %q, want the stop comment", got)
		}
		if _, err := p.awaitEnded(); !errors.Is(err, errStopped) {
			t.Fatalf("ended with %v, want stopped", err)
		}
	})
	t.Run("park refused", func(t *testing.T) {
		t.Parallel()
		// Refused (something came meanwhile), the stream reads on and
		// parks again at once, rather than at its next write.
		p := newParkedStream(t, time.Minute, func(f *parkFeed) { f.refuse = 1 })
		p.awaitParked()
		p.conn.Close()
		if ctx, err := p.awaitEnded(); !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			t.Fatalf("ended with %v, want cancelled", err)
		}
	})
	t.Run("cannot park", func(t *testing.T) {
		t.Parallel()
		// A Feed that cannot wake the stream on all it waits for: served
		// with a goroutine watching the client, which notices it leave.
		p := newParkedStream(t, time.Minute, func(f *parkFeed) { f.parks = false })
		p.f.add(1)
		if got := p.next(); got != "1\n" {
			t.Fatalf("frame %q, want 1", got)
		}
		p.conn.Close()
		if ctx, err := p.awaitEnded(); !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			t.Fatalf("ended with %v, want cancelled", err)
		}
		select {
		case <-p.f.parked:
			t.Fatal("a stream that cannot park parked")
		default:
		}
	})
	t.Run("parent done", func(t *testing.T) {
		t.Parallel()
		p := newParkedStream(t, time.Minute)
		p.awaitParked()
		p.cancel()
		if _, err := p.awaitEnded(); !errors.Is(err, context.Canceled) {
			t.Fatalf("ended with %v, want the parent's end", err)
		}
	})
}
