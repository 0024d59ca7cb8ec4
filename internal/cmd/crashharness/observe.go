package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// webhookSecret is the secret of the demo's subscription.
const webhookSecret = "crash-harness-webhook-secret-0123"

// receiver is the HTTPS webhook receiver: it checks every delivery's
// signature and records the event IDs.
type receiver struct {
	srv    *httptest.Server
	url    string
	caFile string

	mu       sync.Mutex
	events   map[string]int // event ID → deliveries
	arrivals []time.Time    // when each valid delivery came
	invalid  int            // deliveries whose signature did not match
	mismatch int            // deliveries whose X-Service-Event-Id is not their body's id
}

func newReceiver(dir string) (*receiver, error) {
	rc := &receiver{events: make(map[string]int)}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	// Handshakes cut short by a kill are expected: do not log them.
	rc.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	rc.srv.StartTLS()
	rc.url = rc.srv.URL + "/hooks"
	rc.caFile = filepath.Join(dir, "receiver.pem")
	cert := rc.srv.Certificate()
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	if err := os.WriteFile(rc.caFile, pemBytes, 0o600); err != nil {
		return nil, err
	}
	return rc, nil
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := lifecycle.VerifyWebhookRequest(r, webhookSecret, 0)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.invalid++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var env struct {
		ID string `json:"id"`
	}
	json.Unmarshal(body, &env)
	if env.ID == "" || env.ID != r.Header.Get(lifecycle.HeaderEventID) {
		rc.mismatch++
	}
	rc.events[env.ID]++
	rc.arrivals = append(rc.arrivals, time.Now())
	w.WriteHeader(http.StatusNoContent)
}

// has returns how many of ids the receiver got.
func (rc *receiver) has(ids []string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, id := range ids {
		if rc.events[id] > 0 {
			n++
		}
	}
	return n
}

// firstAfter returns when the first delivery after t came.
func (rc *receiver) firstAfter(t time.Time) (time.Time, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return firstAfter(rc.arrivals, t)
}

// firstAfter returns the first of the ascending times ts after t.
func firstAfter(ts []time.Time, t time.Time) (time.Time, bool) {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].After(t) })
	if i == len(ts) {
		return time.Time{}, false
	}
	return ts[i], true
}

func (rc *receiver) close() { rc.srv.Close() }

// observer follows the event stream of one server across restarts and
// outages, resuming with Last-Event-ID, and records what it saw in order.
type observer struct {
	srv *server
	st  *state // counts the answers that open no stream

	mu         sync.Mutex
	ids        []string
	seqs       []int64
	times      []time.Time // when each frame came
	reconnects int
	lastFrame  time.Time
	hangUp     context.CancelFunc // ends the stream being read
}

func newObserver(srv *server, st *state) *observer { return &observer{srv: srv, st: st} }

// run reads streams until ctx is done.
func (o *observer) run(ctx context.Context) {
	client := &http.Client{} // no timeout: a stream lasts
	for ctx.Err() == nil {
		o.mu.Lock()
		last := ""
		if len(o.ids) > 0 {
			last = o.ids[len(o.ids)-1]
		}
		o.mu.Unlock()
		sctx, hangUp := context.WithCancel(ctx)
		o.mu.Lock()
		o.hangUp = hangUp
		o.mu.Unlock()
		req, _ := http.NewRequestWithContext(sctx, "GET", o.srv.base+"/task-events/stream?heartbeatSeconds=10", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := client.Do(req)
		if err != nil {
			hangUp()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if resp.StatusCode == http.StatusOK {
			o.read(resp)
		} else {
			// Refused (a store outage: 503 store_unavailable): counted
			// with the workload's answers, and tried again.
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			o.st.count(o.srv, req.Method, req.URL.Path, resp.StatusCode, resp.Header, data, 0)
			time.Sleep(storeRetry)
		}
		resp.Body.Close()
		hangUp()
		o.mu.Lock()
		o.reconnects++
		o.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// drop ends the stream being read, as a client that lost its connection;
// the observer reconnects at once, with Last-Event-ID.
func (o *observer) drop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hangUp != nil {
		o.hangUp()
	}
}

// read records the frames of one stream until it ends. A frame counts
// once its blank line came, as an EventSource dispatches it: one cut off
// by a dropped connection is sent again on reconnection.
func (o *observer) read(resp *http.Response) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			var env struct {
				Sequence int64 `json:"sequence"`
			}
			json.Unmarshal([]byte(data), &env)
			o.mu.Lock()
			o.ids = append(o.ids, id)
			o.seqs = append(o.seqs, env.Sequence)
			o.lastFrame = time.Now()
			o.times = append(o.times, o.lastFrame)
			o.mu.Unlock()
			data = ""
		}
	}
}

// seen returns what the observer saw so far.
func (o *observer) seen() (ids []string, seqs []int64, last time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ids...), append([]int64(nil), o.seqs...), o.lastFrame
}

// firstAfter returns when the first frame after t came.
func (o *observer) firstAfter(t time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return firstAfter(o.times, t)
}
