package lifecycle_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// TestStreamSeam writes 10,000 events from several goroutines, in
// transactions of one to eight events, while clients with different filters
// connect, read a random number of events, drop the connection and resume
// from the last event they saw (by Last-Event-ID or by cursor). The broker
// keeps only 32 events, so clients that fall behind are cut off and
// resume too. Every client must see every event its filter keeps, exactly
// once and in sequence order.
func TestStreamSeam(t *testing.T) {
	t.Parallel()
	const (
		writers  = 4
		perWrite = 2500
		tasks    = 8
	)
	e := newEnv(t, noPolling, func(c *lifecycle.Config) {
		c.StreamLagLimit = 32
		c.MaxStreamsPerKey = 100
	})
	srv := e.serve()
	var taskIDs []string
	for i := range tasks {
		taskIDs = append(taskIDs, e.CreateTask(apitest.TaskBody(fmt.Sprintf("ENG-%d", i)))["id"].(string))
	}
	genesis := e.Events()[tasks-1]
	types := []lifecycle.EventType{lifecycle.EventTaskUpdated, lifecycle.EventTaskReviewed, lifecycle.EventTaskShipped, lifecycle.EventTaskAwaitingUser}

	type client struct {
		query string
		keep  func(ev *lifecycle.Event) bool
		live  bool // starts at the live tail rather than at genesis
	}
	all := func(*lifecycle.Event) bool { return true }
	clients := []client{
		{"", all, false},
		{"", all, false},
		{"", all, true},
		{"eventTypes=task.reviewed,task.shipped", func(ev *lifecycle.Event) bool {
			return ev.Type == lifecycle.EventTaskReviewed || ev.Type == lifecycle.EventTaskShipped
		}, false},
		{"taskId=" + taskIDs[3], func(ev *lifecycle.Event) bool { return ev.TaskID == taskIDs[3] }, false},
		{"taskId=" + taskIDs[5], func(ev *lifecycle.Event) bool { return ev.TaskID == taskIDs[5] }, true},
		{"eventTypes=task.awaiting_user&taskId=" + taskIDs[0], func(ev *lifecycle.Event) bool {
			return ev.Type == lifecycle.EventTaskAwaitingUser && ev.TaskID == taskIDs[0]
		}, false},
	}

	// done is closed once every event is written and lasts holds the newest
	// event each client's filter keeps.
	done := make(chan struct{})
	lasts := make([]string, len(clients))
	results := make([]seamResult, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = seamClient(srv, e, c.query, genesis.ID, c.live, done, &lasts[i], int64(i))
		}()
	}
	var wwg sync.WaitGroup
	for w := range writers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for left := perWrite; left > 0; {
				n := min(left, 1+rng.IntN(8))
				batch := make([]*lifecycle.Event, n)
				for j := range batch {
					batch[j] = testEvent(taskIDs[rng.IntN(tasks)], types[rng.IntN(len(types))])
				}
				if err := e.Svc.AppendEventsForTest(context.Background(), batch); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				left -= n
			}
		}()
	}
	wwg.Wait()
	if t.Failed() {
		close(done)
		wg.Wait()
		return
	}
	final := e.eventsAfter(genesis.Sequence)
	if len(final) != writers*perWrite {
		t.Fatalf("%d events stored after genesis, want %d", len(final), writers*perWrite)
	}
	for i, c := range clients {
		for j := range final {
			if c.keep(&final[j]) {
				lasts[i] = final[j].ID
			}
		}
	}
	close(done)
	wg.Wait()

	for i, c := range clients {
		r := results[i]
		if r.err != nil {
			t.Errorf("client %d (?%s): %v", i, c.query, r.err)
			continue
		}
		var want []string
		for j := range final {
			ev := &final[j]
			if c.live && ev.Sequence <= r.liveFrom {
				continue // committed before the client opened: maybe seen, maybe not
			}
			if c.keep(ev) {
				want = append(want, ev.ID)
			}
		}
		got := r.ids
		if c.live {
			// Events committed between the client's first request and its
			// response may or may not be included; those after must be.
			got = got[len(got)-min(len(got), len(want)):]
			for _, id := range r.ids[:len(r.ids)-len(got)] {
				ev := findEvent(final, id)
				if ev == nil || !c.keep(ev) || ev.Sequence > r.liveFrom || ev.Sequence <= r.liveAfter {
					t.Errorf("client %d (?%s, live) got %s outside its window", i, c.query, id)
				}
			}
		}
		if len(got) != len(want) {
			t.Errorf("client %d (?%s): %d events, want %d", i, c.query, len(got), len(want))
		}
		for j := range min(len(got), len(want)) {
			if got[j] != want[j] {
				t.Errorf("client %d (?%s): event %d is %s, want %s", i, c.query, j, got[j], want[j])
				break
			}
		}
		t.Logf("client %d (?%s): %d events over %d connections, %d cut off", i, c.query, len(r.ids), r.connections, r.cutOff)
	}
}

// seamResult is what one client of TestStreamSeam saw.
type seamResult struct {
	ids         []string
	connections int
	cutOff      int   // connections the server ended
	liveAfter   int64 // for a live client: the last sequence before its last request without a cursor
	liveFrom    int64 // and the last one once that stream was open
	err         error
}

// seamClient reads the stream with the filter of query, resuming after
// every drop, until done is closed and it has received *last, the newest
// event its filter keeps, which is set before done is closed.
func seamClient(srv *httptest.Server, e *env, query, genesis string, live bool, done <-chan struct{}, last *string, seed int64) (r seamResult) {
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	cursor := genesis
	if live {
		cursor = ""
		r.liveAfter = e.lastSequence()
	}
	seen := map[string]bool{}
	var lastSeq int64
	doneC := done
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		r.connections++
		if live && cursor == "" {
			// No event received yet (a first connection, or one cut off
			// before its first event): this is a fresh start at the live
			// tail, and what came before it is not this client's to see.
			r.liveAfter = e.lastSequence()
		}
		ctx, cancel := context.WithCancel(context.Background())
		q := query
		header := http.Header{}
		if cursor != "" {
			if rng.IntN(2) == 0 {
				header.Set("Last-Event-ID", cursor)
			} else {
				q += "&cursor=" + cursor
			}
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/task-events/stream?"+q, nil)
		req.Header = header
		req.Header.Set("Authorization", "Bearer "+e.Admin)
		resp, err := srv.Client().Do(req)
		if err != nil {
			cancel()
			r.err = err
			return r
		}
		if resp.StatusCode != http.StatusOK {
			cancel()
			resp.Body.Close()
			r.err = fmt.Errorf("status %d", resp.StatusCode)
			return r
		}
		if live && cursor == "" {
			r.liveFrom = e.lastSequence()
		}
		quota := 1 + rng.IntN(1500) // events to read before dropping the connection
		frames := make(chan string)
		go func() {
			defer close(frames)
			br := bufio.NewReader(resp.Body)
			var block strings.Builder
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				block.WriteString(line)
				if line == "\n" {
					select {
					case frames <- block.String():
					case <-ctx.Done():
						return
					}
					block.Reset()
				}
			}
		}()
		caughtUp := false
	read:
		for quota > 0 {
			select {
			case <-doneC:
				// Every event is written: finish once the last one this
				// filter keeps has come.
				doneC = nil
				if cursor == *last {
					caughtUp = true
					break read
				}
			case block, ok := <-frames:
				if !ok {
					r.cutOff++
					break read
				}
				if strings.HasPrefix(block, ":") {
					continue
				}
				ev, err := parseFrameErr(block)
				if err != nil {
					r.err = err
					break read
				}
				if seen[ev.ID] {
					r.err = fmt.Errorf("event %s twice", ev.ID)
					break read
				}
				if ev.Sequence <= lastSeq {
					r.err = fmt.Errorf("event %s (sequence %d) after sequence %d", ev.ID, ev.Sequence, lastSeq)
					break read
				}
				seen[ev.ID] = true
				lastSeq = ev.Sequence
				r.ids = append(r.ids, ev.ID)
				cursor = ev.ID
				quota--
				if doneC == nil && cursor == *last {
					caughtUp = true
					break read
				}
			}
		}
		cancel()
		resp.Body.Close()
		if r.err != nil || caughtUp {
			return r
		}
	}
	r.err = fmt.Errorf("not caught up within the deadline after %d events", len(r.ids))
	return r
}

// parseFrameErr is parseFrame for goroutines that cannot fail the test.
func parseFrameErr(block string) (lifecycle.Event, error) {
	lines := strings.Split(block, "\n")
	if len(lines) != 6 || lines[0] != "retry: 5000" || !strings.HasPrefix(lines[1], "id: ") ||
		!strings.HasPrefix(lines[2], "event: ") || !strings.HasPrefix(lines[3], "data: ") {
		return lifecycle.Event{}, fmt.Errorf("malformed frame %q", block)
	}
	var ev lifecycle.Event
	if err := json.Unmarshal([]byte(lines[3][len("data: "):]), &ev); err != nil {
		return ev, fmt.Errorf("frame %q: %w", block, err)
	}
	if lines[1] != "id: "+ev.ID || lines[2] != "event: "+string(ev.Type) {
		return ev, fmt.Errorf("frame %q: id or event line differs from the envelope", block)
	}
	return ev, nil
}

// eventsAfter returns every stored event with a sequence above after.
func (e *env) eventsAfter(after int64) []lifecycle.Event {
	e.T.Helper()
	var out []lifecycle.Event
	for {
		page, err := e.Store.Events(context.Background(), lifecycle.EventFilter{After: after, Limit: 10000})
		if err != nil {
			e.T.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Sequence
	}
}

// lastSequence returns the newest committed sequence.
func (e *env) lastSequence() int64 {
	b, err := e.Store.EventBounds(context.Background())
	if err != nil {
		e.T.Error(err)
	}
	return b.Last
}

// findEvent returns the event of evs with the given ID, or nil.
func findEvent(evs []lifecycle.Event, id string) *lifecycle.Event {
	for i := range evs {
		if evs[i].ID == id {
			return &evs[i]
		}
	}
	return nil
}
