package demoload

import (
	"bufio"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WebhookSecret is the secret of every subscription the load makes.
const WebhookSecret = "demoload-webhook-secret-0123456789"

// Receiver is an HTTPS webhook receiver on 127.0.0.1 whose answer
// depends on the path's first segment: /ok/ answers 200, /slow/ 200
// after a pause, /fail/ 503 (retried later), /gone/ 410 (which disables
// the subscription), /flaky/ 200 or 503 as SetFlaky says.
type Receiver struct {
	// URL is the receiver's base URL (https).
	URL string
	// CAFile is a PEM file of the receiver's certificate, for the demo's
	// -webhook-ca.
	CAFile string
	// Slow is the pause of /slow/ paths.
	Slow time.Duration

	srv        *httptest.Server
	deliveries atomic.Int64
	flakyDown  atomic.Bool
}

// SetFlaky makes the /flaky/ paths answer 503 (down) or 200.
func (r *Receiver) SetFlaky(down bool) { r.flakyDown.Store(down) }

// NewReceiver starts a receiver, writing its certificate into dir.
func NewReceiver(dir string) (*Receiver, error) {
	r := &Receiver{Slow: 300 * time.Millisecond}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.srv.StartTLS()
	r.URL = r.srv.URL
	r.CAFile = filepath.Join(dir, "receiver.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(r.CAFile, cert, 0o600); err != nil {
		r.srv.Close()
		return nil, err
	}
	return r, nil
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.deliveries.Add(1)
	kind, _, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	switch kind {
	case "slow":
		select {
		case <-time.After(r.Slow):
		case <-req.Context().Done():
		}
	case "fail":
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case "flaky":
		if r.flakyDown.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	case "gone":
		w.WriteHeader(http.StatusGone)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Deliveries returns how many deliveries came.
func (r *Receiver) Deliveries() int64 { return r.deliveries.Load() }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// Subscribe subscribes n receivers' URLs to every event type, named by
// kinds in turn (such as "ok", "ok", "slow", "fail"), and returns their
// subscription IDs.
func (d *Demo) Subscribe(ctx context.Context, r *Receiver, n int, kinds ...string) ([]string, error) {
	var ids []string
	for i := range n {
		url := fmt.Sprintf("%s/%s/%d", r.URL, kinds[i%len(kinds)], i)
		data, err := d.must(ctx, http.StatusCreated, "POST", "/event-subscriptions", map[string]any{"url": url,
			"eventTypes": []string{"task.updated", "task.reviewed", "task.shipped", "task.awaiting_user", "task.merge_queue", "task.ci_failed"}, "secret": WebhookSecret},
			fmt.Sprintf("subscribe-%d-%d", time.Now().UnixNano(), i))
		if err != nil {
			return nil, err
		}
		id, _ := data["id"].(string)
		ids = append(ids, id)
	}
	return ids, nil
}

// Streams are event streams held open on the demo, each reopened when
// the demo ends it.
type Streams struct {
	open   atomic.Int64
	events atomic.Int64
	ends   atomic.Int64
	wg     sync.WaitGroup
}

// Open returns how many streams are open.
func (s *Streams) Open() int64 { return s.open.Load() }

// Events returns how many events the streams received, together.
func (s *Streams) Events() int64 { return s.events.Load() }

// Ends returns how many times a stream was ended.
func (s *Streams) Ends() int64 { return s.ends.Load() }

// Wait waits for the streams' goroutines, once ctx is done.
func (s *Streams) Wait() { s.wg.Wait() }

// OpenStreams opens perKey event streams with each key (the demo allows
// 5 per key), and returns once each has been answered, or with the first
// refusal. They stay open, and are reopened when ended, until ctx is done.
// They are opened 8 at a time: an authentication under way counts as a
// failure of its client (127.0.0.1 here) until it succeeds, and the
// Service refuses a client more than 20 of those at once.
func (d *Demo) OpenStreams(ctx context.Context, keys []string, perKey int) (*Streams, error) {
	s := &Streams{}
	// A connection per stream, over HTTP/1.1, as EventSource does.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}}
	opening := make(chan struct{}, 8)
	answered := make(chan error, len(keys)*perKey)
	for _, key := range keys {
		for range perKey {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				first := true
				for ctx.Err() == nil {
					opening <- struct{}{}
					released := false
					release := func() {
						if !released {
							released = true
							<-opening
						}
					}
					err := s.read(ctx, client, d.Base, key, func(err error) {
						release()
						if first {
							answered <- err
							first = false
						}
					})
					release()
					if err != nil && first {
						answered <- err
						return
					}
					var refused refusal
					if errors.As(err, &refused) {
						return // a revoked or expired key, say: not retried
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
		}
	}
	for range len(keys) * perKey {
		if err := <-answered; err != nil {
			return s, err
		}
	}
	return s, nil
}

// read holds one stream open until the demo or ctx ends it; answered is
// called once the answer's header came (with an error for an answer
// other than 200).
func (s *Streams) read(ctx context.Context, client *http.Client, base, key string, answered func(error)) error {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/task-events/stream", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		err := refusal(fmt.Sprintf("GET /task-events/stream: %s %s", resp.Status, raw))
		answered(err)
		return err
	}
	answered(nil)
	s.open.Add(1)
	defer s.open.Add(-1)
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data:") {
			s.events.Add(1)
		}
	}
	if ctx.Err() == nil {
		s.ends.Add(1)
	}
	return nil
}

// refusal is an answer other than 200 to a stream's request.
type refusal string

// Error returns the refusal's status and body.
func (r refusal) Error() string { return string(r) }

// Counts are what the agents did.
type Counts struct {
	// Created, Submitted and Shipped count the tasks created, submitted
	// and shipped (the ship accepted); Refused the requests sent to be
	// refused.
	Created, Submitted, Shipped, Refused atomic.Int64
}

// Agents run workers agents, each taking tasks of its project (agentN)
// through create, start, submit, CI, review and ship (merge only, or
// merge and deploy to staging or production) until ctx is done, with a
// pause of up to pause between steps. A few of their requests are refused
// on purpose, as real clients' are (a task that does not exist, a ship at
// a stale head), so that the answers are not all 2xx.
func (d *Demo) Agents(ctx context.Context, workers int, pause time.Duration, seed uint64, counts *Counts) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			for n := 0; ctx.Err() == nil; n++ {
				d.agentTask(ctx, fmt.Sprintf("agent%d", w%4), fmt.Sprintf("AG-%d-%d-%d", seed%1000, w, n), rnd, pause, counts)
			}
		}()
	}
	wg.Wait()
}

// agentTask takes one task through its lifecycle; it gives up at the
// first unexpected answer.
func (d *Demo) agentTask(ctx context.Context, project, ident string, rnd *rand.Rand, pause time.Duration, counts *Counts) {
	wait := func() bool {
		if pause <= 0 {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(rnd.Int64N(int64(pause)))):
			return true
		}
	}
	step := func(want int, method, path string, body any, idemKey string) map[string]any {
		if !wait() {
			return nil
		}
		a, err := d.Do(ctx, "", method, path, body, idemKey)
		if err != nil || a.Status != want {
			return nil
		}
		return a.Data()
	}
	refuse := func(method, path string, body any, idemKey string) {
		if _, err := d.Do(ctx, "", method, path, body, idemKey); err == nil {
			counts.Refused.Add(1)
		}
	}
	task := step(http.StatusCreated, "POST", "/tasks", map[string]any{"identifier": ident, "title": "Agent task " + ident,
		"links": map[string]any{"issue": "https://issues.example.com/" + ident}, "context": map[string]any{"project": project}}, "")
	if task == nil {
		return
	}
	counts.Created.Add(1)
	id, _ := task["id"].(string)
	if rnd.IntN(10) == 0 {
		refuse("GET", "/tasks/tsk_doesnotexist0000000000", nil, "") // 404
	}
	d.Do(ctx, "", "GET", "/tasks/"+id, nil, "")
	if step(http.StatusOK, "POST", "/tasks/"+id+"/start", map[string]any{}, "") == nil {
		return
	}
	sub := step(http.StatusAccepted, "POST", "/tasks/"+id+"/submit", map[string]any{"summary": "Work on " + ident + " is done.", "mode": "artifact",
		"checks": []map[string]any{{"name": "unit", "status": "passed"}}}, "submit-"+id)
	if sub == nil {
		return
	}
	counts.Submitted.Add(1)
	head, _ := sub["headSha"].(string)
	if step(http.StatusOK, "POST", "/tasks/"+id+"/checks", map[string]any{"headSha": head, "checks": []map[string]any{{"name": "build", "status": "passed"}}}, "") == nil {
		return
	}
	d.Do(ctx, "", "GET", "/tasks/"+id+"/ci-status", nil, "")
	if step(http.StatusCreated, "POST", "/tasks/"+id+"/reviews", map[string]any{"outcome": "approved", "body": "Fine."}, "") == nil {
		return
	}
	if rnd.IntN(8) == 0 {
		refuse("POST", "/tasks/"+id+"/ship", map[string]any{"mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": strings.Repeat("0", 40)}, "stale-"+id) // 409
	}
	ship := map[string]any{"mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": head}
	switch r := rnd.IntN(10); {
	case r < 3:
		ship["mode"] = "merge_and_deploy"
	case r < 4:
		ship["mode"], ship["targetEnvironment"] = "merge_and_deploy", "production"
	}
	op := step(http.StatusAccepted, "POST", "/tasks/"+id+"/ship", ship, "ship-"+id)
	if op == nil {
		return
	}
	counts.Shipped.Add(1)
	opID, _ := op["operationId"].(string)
	for range 50 {
		if !wait() {
			return
		}
		a, err := d.Do(ctx, "", "GET", "/ship-operations/"+opID, nil, "")
		if err != nil {
			return
		}
		if st, _ := a.Data()["status"].(string); st == "succeeded" || st == "failed" {
			return
		}
	}
}
