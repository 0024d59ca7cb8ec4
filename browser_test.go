//go:build unix

package lifecycle_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
)

// browserPage reads the stream with EventSource, deduplicates on the event
// id, and reports to the host: /ready once open, /progress after each new
// event, and /result with everything once it has want events.
const browserPage = `<!doctype html>
<meta charset="utf-8">
<title>event stream</title>
<script>
const want = %d;
const ids = [], seen = new Set();
let dups = 0, opens = 0, errors = 0, bad = 0;
const post = (path, body) => fetch(path, {method: "POST", body: body});
const es = new EventSource("/api/task-events/stream?heartbeatSeconds=10");
es.onopen = () => { if (++opens === 1) post("/ready", ""); };
es.onerror = () => { errors++; };
const onEvent = (m) => {
  const env = JSON.parse(m.data);
  if (env.id !== m.lastEventId || env.type !== m.type) bad++;
  if (seen.has(m.lastEventId)) { dups++; return; }
  seen.add(m.lastEventId);
  ids.push(m.lastEventId);
  post("/progress", String(ids.length));
  if (ids.length === want) {
    es.close();
    post("/result", JSON.stringify({ids, dups, opens, errors, bad}));
  }
};
for (const t of ["task.updated", "task.reviewed", "task.shipped", "task.awaiting_user", "task.merge_queue"]) {
  es.addEventListener(t, onEvent);
}
</script>
`

// browserResult is what the page reports.
type browserResult struct {
	IDs    []string `json:"ids"`
	Dups   int      `json:"dups"`
	Opens  int      `json:"opens"`
	Errors int      `json:"errors"`
	Bad    int      `json:"bad"`
}

// sessionAuth is the host's middleware that lets a browser page use the
// stream. EventSource cannot send an Authorization header, so the host
// gives the page a same-origin, HttpOnly session cookie and translates it
// into the bearer key of that session before the lifecycle handler runs;
// the library's authentication stays as it is.
func sessionAuth(sessions map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("session"); err == nil && r.Header.Get("Authorization") == "" {
			if key, ok := sessions[c.Value]; ok {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+key)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// streamRequest is what the host saw of one stream request.
type streamRequest struct {
	lastEventID string
	status      int
	resumeMode  string
}

// headerSpy records the status and resume mode of a response, written by
// net/http or by a stream that took its connection over (which sends 200);
// it unwraps to the real writer, so flushing goes through, and keeps the
// connections taken over so that the test can drop them.
type headerSpy struct {
	http.ResponseWriter
	seen     func(status int, h http.Header)
	hijacked func(net.Conn)
}

func (w *headerSpy) WriteHeader(status int) {
	w.seen(status, w.Header())
	w.ResponseWriter.WriteHeader(status)
}

func (w *headerSpy) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.seen(http.StatusOK, w.Header())
		w.hijacked(conn)
	}
	return conn, rw, err
}

func (w *headerSpy) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestBrowserEventSourceResumes runs a page in headless Chromium whose
// EventSource reads the stream. Midway the server drops every connection
// and more events are committed while the browser is away; the browser
// reconnects by itself with Last-Event-ID, and the page ends with every
// event exactly once, in order.
func TestBrowserEventSourceResumes(t *testing.T) {
	t.Parallel()
	chromium := testsupport.FindChromium(t)
	const total, half = 30, 12
	e := newEnv(t, noPolling)

	sid := make([]byte, 16)
	rand.Read(sid)
	session := hex.EncodeToString(sid)
	sessions := map[string]string{session: e.Key(lifecycle.ScopeEventsRead)}

	var (
		mu       sync.Mutex
		requests []streamRequest
		taken    []net.Conn // stream connections taken over from net/http
	)
	ready := make(chan struct{}, 1)
	progress := make(chan int, total*2)
	result := make(chan browserResult, 1)
	api := sessionAuth(sessions, http.StripPrefix("/api", e.Svc.Handler()))
	host := http.NewServeMux()
	host.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, browserPage, total)
	})
	host.HandleFunc("GET /api/task-events/stream", func(w http.ResponseWriter, r *http.Request) {
		spy := &headerSpy{ResponseWriter: w, seen: func(status int, h http.Header) {
			mu.Lock()
			defer mu.Unlock()
			requests = append(requests, streamRequest{r.Header.Get("Last-Event-ID"), status, h.Get("X-Service-Resume-Mode")})
		}, hijacked: func(c net.Conn) {
			mu.Lock()
			defer mu.Unlock()
			taken = append(taken, c)
		}}
		api.ServeHTTP(spy, r)
	})
	host.HandleFunc("POST /ready", func(w http.ResponseWriter, r *http.Request) {
		select {
		case ready <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	})
	host.HandleFunc("POST /progress", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if n, err := strconv.Atoi(string(body)); err == nil {
			progress <- n
		}
		w.WriteHeader(http.StatusNoContent)
	})
	host.HandleFunc("POST /result", func(w http.ResponseWriter, r *http.Request) {
		var res browserResult
		if err := json.NewDecoder(r.Body).Decode(&res); err != nil {
			t.Errorf("result: %v", err)
		}
		result <- res
		w.WriteHeader(http.StatusNoContent)
	})
	host.HandleFunc("GET /favicon.ico", http.NotFound)
	srv := httptest.NewServer(host)
	t.Cleanup(srv.Close)

	profile := t.TempDir() // removed after the browser is stopped below
	var browserLog bytes.Buffer
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+profile, srv.URL+"/")
	cmd.Stdout, cmd.Stderr = &browserLog, &browserLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so that its helpers are stopped with it
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("chromium output:\n%s", browserLog.String())
		}
	})

	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(testsupport.BrowserTimeout):
			t.Fatalf("the page did not report %s within %s", what, testsupport.BrowserTimeout)
		}
	}
	wait("an open stream", ready)
	before := len(e.Events())
	for i := range half {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("WEB-%d", i)))
	}
	reached := make(chan struct{})
	go func() {
		for n := range progress {
			if n >= half {
				close(reached)
				return
			}
		}
	}()
	wait(fmt.Sprintf("%d events", half), reached)

	// Drop the stream (and every other connection); commit the rest while
	// the browser waits the 5 seconds the retry field asks for.
	srv.CloseClientConnections()
	mu.Lock()
	for _, c := range taken {
		c.Close()
	}
	mu.Unlock()
	for i := half; i < total; i++ {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("WEB-%d", i)))
	}

	var res browserResult
	select {
	case res = <-result:
	case <-time.After(testsupport.BrowserTimeout):
		t.Fatalf("the page did not report its result within %s", testsupport.BrowserTimeout)
	}
	var want []string
	for _, ev := range e.Events()[before:] {
		want = append(want, ev.ID)
	}
	if !slices.Equal(res.IDs, want) {
		t.Errorf("the page got %v, want %v", res.IDs, want)
	}
	if res.Dups != 0 || res.Bad != 0 {
		t.Errorf("the page saw %d duplicates and %d frames whose id or type differ from the envelope", res.Dups, res.Bad)
	}
	if res.Opens < 2 || res.Errors < 1 {
		t.Errorf("the page opened %d times with %d errors, want a reconnection", res.Opens, res.Errors)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 2 {
		t.Fatalf("the host saw %d stream requests, want at least 2", len(requests))
	}
	first := requests[0]
	if first.lastEventID != "" || first.status != http.StatusOK || first.resumeMode != "live" {
		t.Errorf("first request %+v, want a live stream without Last-Event-ID", first)
	}
	resumed := requests[1]
	if resumed.lastEventID != want[half-1] || resumed.status != http.StatusOK || resumed.resumeMode != "replay_then_live" {
		t.Errorf("second request %+v, want Last-Event-ID %s replayed then live", resumed, want[half-1])
	}
}
