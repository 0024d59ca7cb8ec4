package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/client"
)

// TestStreamResumesAcrossRestart reads events while the server is stopped
// and started again on the same address, with events committed while it
// was down: the stream returns every event once, in order.
func TestStreamResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	ctx := t.Context()
	if _, err := c.CreateTask(ctx, taskParams("WEB-0")); err != nil {
		t.Fatal(err)
	}
	start := s.eventIDs(t)[0]
	stream := c.Events(ctx, client.StreamParams{LastEventID: start, MaxReconnectDelay: 20 * time.Millisecond})
	defer stream.Close()

	got := []string{start}
	read := func(n int) {
		t.Helper()
		for range n {
			ev, err := stream.Next()
			if err != nil {
				t.Fatalf("Next after %d events: %v", len(got), err)
			}
			got = append(got, ev.ID)
		}
	}
	for i := 1; i <= 5; i++ {
		if _, err := s.svc.CreateTask(ctx, taskParams(fmt.Sprintf("WEB-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	read(3)

	addr := s.addr
	s.stop() // ends the stream; the client reconnects and fails until the restart
	s.start(addr)
	for i := 6; i <= 10; i++ {
		if _, err := s.svc.CreateTask(ctx, taskParams(fmt.Sprintf("WEB-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	read(7)
	if want := s.eventIDs(t); !slices.Equal(got, want) {
		t.Fatalf("the stream returned\n%q\nthe store holds\n%q", got, want)
	}
}

// TestStreamGapOnExpiredCursor checks that a cursor the server no longer
// holds is reported once as a *GapError, and the stream goes on live.
func TestStreamGapOnExpiredCursor(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	ctx := t.Context()
	stream := c.Events(ctx, client.StreamParams{LastEventID: "evt_0123456789abcdefghijkl", MaxReconnectDelay: 20 * time.Millisecond})
	defer stream.Close()
	_, err := stream.Next()
	var gap *client.GapError
	if !errors.As(err, &gap) || gap.LastEventID != "evt_0123456789abcdefghijkl" || !errors.Is(err, lifecycle.ErrCursorExpired) {
		t.Fatalf("Next with an unknown cursor = %v, want a *GapError", err)
	}
	done := make(chan lifecycle.Event)
	go func() {
		ev, err := stream.Next()
		if err != nil {
			t.Error(err)
		}
		done <- ev
	}()
	// The stream starts at the live tail once connected; keep creating
	// until it sees one.
	for i := 0; ; i++ {
		task, err := c.CreateTask(ctx, taskParams(fmt.Sprintf("WEB-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-done:
			if ev.Type != lifecycle.EventTaskUpdated {
				t.Fatalf("after the gap: %+v", ev)
			}
			return
		case <-time.After(50 * time.Millisecond):
			_ = task
		}
	}
}

// TestStreamFollowsRetryAndDeduplicates runs the stream against a scripted
// server: it waits the retry: delay, resumes with Last-Event-ID, drops an
// event sent again, reports a 410 and continues without a cursor.
func TestStreamFollowsRetryAndDeduplicates(t *testing.T) {
	t.Parallel()
	frame := func(id string) string {
		return fmt.Sprintf("id: %s\nevent: task.updated\ndata: {\"id\":%q,\"type\":\"task.updated\",\"sequence\":1,\"data\":{}}\n\n", id, id)
	}
	var (
		conn     atomic.Int32
		closedAt atomic.Int64
		problems = make(chan string, 10)
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last := r.Header.Get("Last-Event-ID")
		n := conn.Add(1)
		if n == 2 || n == 3 { // after a 410 the stream reconnects at once
			if waited := time.Since(time.Unix(0, closedAt.Load())); waited < 250*time.Millisecond {
				problems <- fmt.Sprintf("connection %d came %v after the close, before the retry: delay of 300ms", n, waited)
			}
		}
		defer closedAt.Store(time.Now().UnixNano())
		switch n {
		case 1:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "retry: 300\n\n: keepalive\n\n"+frame("evt_A")+frame("evt_B"))
		case 2:
			if last != "evt_B" {
				problems <- "second connection's Last-Event-ID = " + last
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, frame("evt_B")+frame("evt_C"))
		case 3:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"error":{"code":"cursor_expired","message":"The cursor is older than the replay window."}}`)
		default:
			if last != "" {
				problems <- "after a 410 the stream still sent Last-Event-ID " + last
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, frame("evt_D"))
			w.(http.Flusher).Flush()
			<-r.Context().Done() // held open until the client goes: no reconnection
		}
	}))
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: "lsk_x"})
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Events(t.Context(), client.StreamParams{})
	defer stream.Close()
	var got []string
	for len(got) < 5 {
		ev, err := stream.Next()
		var gap *client.GapError
		switch {
		case errors.As(err, &gap):
			got = append(got, "gap after "+gap.LastEventID)
		case err != nil:
			t.Fatal(err)
		default:
			got = append(got, ev.ID)
		}
	}
	if want := []string{"evt_A", "evt_B", "evt_C", "gap after evt_C", "evt_D"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	close(problems)
	for p := range problems {
		t.Error(p)
	}
}
