// Command sseconsumer reads the task event stream of a lifecycle server and
// prints each event once. It shows what a robust consumer does:
//
//   - it resumes after every disconnect with Last-Event-ID, waiting the
//     retry delay the server asks for;
//   - it deduplicates on the event id, as delivery is at least once;
//   - it keeps its cursor in a file (-state), so a restart resumes too;
//   - on 410 cursor_expired it starts again from the live tail, saying that
//     events may have been missed; on 429 it waits Retry-After.
//
// It uses the standard library only.
//
//	go run ./examples/demo &
//	go run ./examples/sseconsumer -key "$(cat lifecycle-demo-data/admin.key)"
//	go run ./examples/sseconsumer -key lsk_... -types task.updated,task.shipped -state cursor.txt
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080/task-events/stream", "URL of GET /task-events/stream")
	key := flag.String("key", os.Getenv("LIFECYCLE_KEY"), "API key with scope events:read (or LIFECYCLE_KEY)")
	types := flag.String("types", "", "comma-separated event types to receive (default all)")
	task := flag.String("task", "", "receive only the events of this task ID")
	state := flag.String("state", "", "file that keeps the last event id, to resume after a restart")
	flag.Parse()
	if *key == "" {
		log.Fatal("sseconsumer: give an API key with -key or LIFECYCLE_KEY")
	}
	u, err := url.Parse(*base)
	if err != nil {
		log.Fatalf("sseconsumer: -url: %v", err)
	}
	q := u.Query()
	if *types != "" {
		q.Set("eventTypes", *types)
	}
	if *task != "" {
		q.Set("taskId", *task)
	}
	u.RawQuery = q.Encode()

	c := &consumer{url: u.String(), key: *key, state: *state, client: http.DefaultClient, sleep: sleep,
		handle: func(e event) {
			var env struct {
				Sequence int64 `json:"sequence"`
				Data     struct {
					TaskIdentifier string `json:"taskIdentifier"`
					Summary        string `json:"summary"`
				} `json:"data"`
			}
			json.Unmarshal([]byte(e.data), &env)
			fmt.Printf("%s %-18s #%d %s: %s\n", e.id, e.typ, env.Sequence, env.Data.TaskIdentifier, env.Data.Summary)
		},
		opened: func(mode string) { log.Printf("stream open (%s)", mode) },
	}
	if *state != "" {
		if b, err := os.ReadFile(*state); err == nil {
			c.lastID = strings.TrimSpace(string(b))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := c.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatalf("sseconsumer: %v", err)
	}
}

// event is one server-sent event.
type event struct {
	id, typ, data string
}

// consumer reads the stream, resuming and deduplicating.
type consumer struct {
	url    string
	key    string
	state  string // file keeping lastID, or ""
	client *http.Client
	handle func(event)
	opened func(resumeMode string) // called when a connection is open, if not nil
	sleep  func(ctx context.Context, d time.Duration) error

	lastID string        // the last event handled: the resume cursor
	retry  time.Duration // reconnection delay, from the server's retry field
	seen   dedup
}

// errFatal marks answers that retrying cannot fix.
var errFatal = errors.New("not retryable")

// run reads the stream until ctx is done or the server refuses for good.
func (c *consumer) run(ctx context.Context) error {
	c.retry = 5 * time.Second
	for {
		wait, err := c.connect(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errFatal):
			return err
		case err != nil:
			log.Printf("stream: %v; reconnecting in %s", err, wait)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// connect reads one connection of the stream, and returns how long to wait
// before the next.
func (c *consumer) connect(ctx context.Context) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.url, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errFatal, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	if c.lastID != "" {
		req.Header.Set("Last-Event-ID", c.lastID)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return c.retry, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if c.opened != nil {
			c.opened(resp.Header.Get("X-Service-Resume-Mode"))
		}
	case http.StatusGone:
		// The cursor is older than the replay window: what happened
		// meanwhile must be read from the API; the stream goes on live.
		log.Printf("stream: cursor %s expired; resuming from the live tail (events in between may be missed; re-read tasks from the API)", c.lastID)
		c.lastID = ""
		return 0, nil
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		wait := c.retry
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			wait = time.Duration(s) * time.Second
		}
		return wait, fmt.Errorf("status %d", resp.StatusCode)
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		if resp.StatusCode >= 500 {
			return c.retry, err
		}
		return 0, fmt.Errorf("%w: %v", errFatal, err) // 400, 401, 403: fix the request or the key
	}
	return c.retry, c.read(resp.Body)
}

// read parses the event stream (https://html.spec.whatwg.org/multipage/server-sent-events.html)
// until it ends, handling every new event.
func (c *consumer) read(body io.Reader) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var (
		e       event
		data    []string
		hasData bool
	)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" { // dispatch
			if hasData && e.id != "" {
				e.data = strings.Join(data, "\n")
				if c.seen.add(e.id) {
					c.handle(e)
				}
				c.lastID = e.id
				c.save()
			}
			e, data, hasData = event{}, data[:0], false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment, such as a keepalive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			e.id = value
		case "event":
			e.typ = value
		case "data":
			data = append(data, value)
			hasData = true
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				c.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF // the server never ends a stream on its own
}

// save keeps the cursor in the state file, if there is one.
func (c *consumer) save() {
	if c.state == "" {
		return
	}
	tmp := c.state + ".tmp"
	if err := os.WriteFile(tmp, []byte(c.lastID+"\n"), 0o600); err == nil {
		os.Rename(tmp, c.state)
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dedupSize is how many recent ids are remembered; duplicates come from a
// replay after a reconnection, so a short memory is enough.
const dedupSize = 4096

// dedup remembers the most recent event ids.
type dedup struct {
	ids  map[string]bool
	ring []string
	next int
}

// add reports whether id is new, and remembers it.
func (d *dedup) add(id string) bool {
	if d.ids == nil {
		d.ids, d.ring = make(map[string]bool, dedupSize), make([]string, dedupSize)
	}
	if d.ids[id] {
		return false
	}
	delete(d.ids, d.ring[d.next])
	d.ring[d.next] = id
	d.next = (d.next + 1) % dedupSize
	d.ids[id] = true
	return true
}
