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

func (rc *receiver) close() { rc.srv.Close() }

// observer follows the event stream across restarts, resuming with
// Last-Event-ID, and records what it saw in order.
type observer struct {
	srv *server

	mu         sync.Mutex
	ids        []string
	seqs       []int64
	reconnects int
	lastFrame  time.Time
}

func newObserver(srv *server) *observer { return &observer{srv: srv} }

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
		req, _ := http.NewRequestWithContext(ctx, "GET", o.srv.base+"/task-events/stream?heartbeatSeconds=10", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := client.Do(req)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if resp.StatusCode == http.StatusOK {
			o.read(resp)
		}
		resp.Body.Close()
		o.mu.Lock()
		o.reconnects++
		o.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// read records the frames of one stream until it ends.
func (o *observer) read(resp *http.Response) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var env struct {
				Sequence int64 `json:"sequence"`
			}
			json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &env)
			o.mu.Lock()
			o.ids = append(o.ids, id)
			o.seqs = append(o.seqs, env.Sequence)
			o.lastFrame = time.Now()
			o.mu.Unlock()
		}
	}
}

// seen returns what the observer saw so far.
func (o *observer) seen() (ids []string, seqs []int64, last time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ids...), append([]int64(nil), o.seqs...), o.lastFrame
}
