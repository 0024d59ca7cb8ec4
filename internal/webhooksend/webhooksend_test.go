package webhooksend

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// newClient returns a client of the tests, dialing as net.Dialer does.
func newClient() *http.Client {
	var d net.Dialer
	return NewClient(ClientConfig{Dial: d.DialContext, Concurrency: 4, Timeout: 5 * time.Second})
}

// attemptTo returns an attempt at url made at a fixed time.
func attemptTo(url string) *Attempt {
	return &Attempt{URL: url, EventID: "evt_1", DeliveryID: "dlv_1", EventType: "task.updated",
		Body: []byte(`{"id":"evt_1"}`), Secret: []byte("s3cret"), At: time.Unix(1795000000, 0)}
}

// A delivery carries the event, its IDs and type, and both signatures,
// each checkable by a receiver with the secret alone.
func TestPostSigned(t *testing.T) {
	t.Parallel()
	got := make(chan *http.Request, 1)
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	a := attemptTo(srv.URL + "/hook")
	out := Post(t.Context(), newClient(), 5*time.Second, a)
	if out != (Outcome{Status: http.StatusNoContent}) {
		t.Fatalf("%+v", out)
	}
	r, body := <-got, <-bodies
	if r.Method != http.MethodPost || r.URL.Path != "/hook" || string(body) != string(a.Body) {
		t.Fatalf("%s %s %s", r.Method, r.URL, body)
	}
	m := hmac.New(sha256.New, a.Secret)
	m.Write(a.Body)
	own := "sha256=" + hex.EncodeToString(m.Sum(nil))
	m = hmac.New(sha256.New, a.Secret)
	m.Write([]byte("evt_1.1795000000." + string(a.Body)))
	standard := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for h, want := range map[string]string{
		"Content-Type": "application/json", "User-Agent": UserAgent,
		HeaderEventID: "evt_1", HeaderDeliveryID: "dlv_1", HeaderEventType: "task.updated", HeaderSignature: own,
		"Webhook-Id": "evt_1", "Webhook-Timestamp": "1795000000", "Webhook-Signature": standard,
		"Accept-Encoding": "",
	} {
		if v := r.Header.Get(h); v != want {
			t.Errorf("%s: %q, want %q", h, v, want)
		}
	}
	if Sign(a.Secret, a.Body) != own || SignStandard(a.Secret, "evt_1", 1795000000, a.Body) != standard {
		t.Error("Sign or SignStandard disagrees with the headers")
	}
}

// Attempt.Header adds the caller's headers, and cannot replace the
// delivery's own.
func TestPostCallerHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	a := attemptTo(srv.URL + "/hook")
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	a.Header = func(h http.Header) {
		h.Set("Traceparent", tp)
		h.Set(HeaderEventID, "evt_forged")
	}
	if out := Post(t.Context(), newClient(), 5*time.Second, a); out.Failure != "" {
		t.Fatalf("%+v", out)
	}
	h := <-got
	if h.Get("Traceparent") != tp || h.Get(HeaderEventID) != "evt_1" {
		t.Errorf("traceparent %q, event ID %q; want %q and evt_1", h.Get("Traceparent"), h.Get(HeaderEventID), tp)
	}
}

// Answers other than 2xx are failures that say what the receiver
// answered; 429 and 503 carry the wait it asked for; a redirect is not
// followed.
func TestPostOutcomes(t *testing.T) {
	t.Parallel()
	followed := make(chan struct{}, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { followed <- struct{}{} })
	mux.HandleFunc("/{status}", func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("retry"); v != "" {
			w.Header().Set("Retry-After", v)
		}
		status, _ := strconv.Atoi(r.PathValue("status"))
		if status/100 == 3 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
		io.WriteString(w, strings.Repeat("x", 100<<10)) // longer than what is read
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tests := []struct {
		path string
		want Outcome
	}{
		{"/200", Outcome{Status: 200}},
		{"/299", Outcome{Status: 299}},
		{"/500", Outcome{Status: 500, Failure: "the receiver answered 500 Internal Server Error"}},
		{"/410", Outcome{Status: 410, Failure: "the receiver answered 410 Gone"}},
		{"/302", Outcome{Status: 302, Failure: "the receiver answered 302 Found; redirects are not followed"}},
		{"/429?retry=7", Outcome{Status: 429, Failure: "the receiver answered 429 Too Many Requests", RetryAfter: 7 * time.Second}},
		{"/503?retry=soon", Outcome{Status: 503, Failure: "the receiver answered 503 Service Unavailable"}},
		{"/500?retry=7", Outcome{Status: 500, Failure: "the receiver answered 500 Internal Server Error"}},
	}
	client := newClient()
	for _, tt := range tests {
		if got := Post(t.Context(), client, 5*time.Second, attemptTo(srv.URL+tt.path)); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.path, got, tt.want)
		}
	}
	if len(followed) > 0 {
		t.Error("a redirect was followed")
	}
}

// A receiver that does not answer in time fails the attempt with the
// timeout, and no URL (it may hold a token) is in the failure.
func TestPostTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	out := Post(t.Context(), newClient(), 200*time.Millisecond, attemptTo(srv.URL+"/hook?token=tok_secret"))
	if out.Status != 0 || out.Failure != "no answer within 200ms" || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Errorf("%+v", out)
	}
}

// errRefused is the error of a dial the tests refuse.
var errRefused = errors.New("refused: a private address")

// A dial that fails is the attempt's failure, without the URL, and the
// dial's error is found in Outcome.Err.
func TestPostDialFails(t *testing.T) {
	t.Parallel()
	client := NewClient(ClientConfig{Concurrency: 1, Timeout: time.Second,
		Dial: func(context.Context, string, string) (net.Conn, error) { return nil, errRefused }})
	out := Post(t.Context(), client, time.Second, attemptTo("http://hooks.example/x?token=tok_secret"))
	if out.Status != 0 || !errors.Is(out.Err, errRefused) || out.Failure != errRefused.Error() {
		t.Errorf("%+v", out)
	}
	out = Post(t.Context(), client, time.Second, attemptTo("://no scheme"))
	if out.Status != 0 || !strings.HasPrefix(out.Failure, "cannot build the request: ") || out.Err == nil {
		t.Errorf("%+v", out)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"30", 30 * time.Second},
		{"-1", 0},
		{"99999999999", (1 << 31) * time.Second},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"tomorrow", 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.v, now); got != tt.want {
			t.Errorf("%q: %s, want %s", tt.v, got, tt.want)
		}
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	schedule := []time.Duration{10 * time.Second, time.Minute}
	if d := Delay(schedule, 1, 0, 0); d != 10*time.Second {
		t.Errorf("attempt 1: %s", d)
	}
	if d := Delay(schedule, 2, 0, 0); d != time.Minute {
		t.Errorf("attempt 2: %s", d)
	}
	for ra, want := range map[time.Duration]time.Duration{
		time.Second: 10 * time.Second, 15 * time.Second: 15 * time.Second, time.Hour: 20 * time.Second,
	} {
		if d := Delay(schedule, 1, 0, ra); d != want {
			t.Errorf("Retry-After %s: %s, want %s", ra, d, want)
		}
	}
	shorter := false
	for range 1000 {
		d := Delay(schedule, 2, 0.25, 0)
		if d > time.Minute || d < 45*time.Second {
			t.Fatalf("jitter 0.25 of a minute: %s", d)
		}
		shorter = shorter || d < time.Minute
	}
	if !shorter {
		t.Error("the jitter never made a delay shorter")
	}
}

// The client clones its TLS configuration and uses no proxy.
func TestNewClient(t *testing.T) {
	t.Parallel()
	tlsConfig := &tls.Config{ServerName: "hooks.example"}
	tr := NewClient(ClientConfig{TLS: tlsConfig, Concurrency: 3, Timeout: time.Second}).Transport.(*http.Transport)
	if tr.TLSClientConfig == tlsConfig || tr.TLSClientConfig.ServerName != "hooks.example" {
		t.Error("the TLS configuration is not a clone")
	}
	if tr.Proxy != nil || !tr.DisableCompression || tr.MaxIdleConnsPerHost != 3 || tr.MaxIdleConns != 12 || tr.ResponseHeaderTimeout != time.Second {
		t.Errorf("%+v", tr)
	}
}

// Each starts the calls in order, never more at once than either
// semaphore allows, and no more once its context ends as it waits.
func TestEach(t *testing.T) {
	t.Parallel()
	perTarget, global := make(chan struct{}, 3), make(chan struct{}, 2)
	startedC := make(chan int)
	release := make(chan struct{})
	var running, most atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Each(t.Context(), perTarget, global, 6, func(i int) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			startedC <- i
			<-release
			running.Add(-1)
		})
	}()
	// Two start (the global bound), then one more as each ends: always the
	// next in order.
	if a, b := <-startedC, <-startedC; min(a, b) != 0 || max(a, b) != 1 {
		t.Fatalf("started first: %d and %d", a, b)
	}
	for next := 2; next < 6; next++ {
		release <- struct{}{}
		if i := <-startedC; i != next {
			t.Fatalf("started %d, want %d", i, next)
		}
	}
	release <- struct{}{}
	release <- struct{}{}
	<-done
	if most.Load() != 2 || len(perTarget) != 0 || len(global) != 0 {
		t.Errorf("%d at once, want 2 (the global bound); slots left taken: %d, %d", most.Load(), len(perTarget), len(global))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	Each(ctx, make(chan struct{}), global, 3, func(i int) { t.Errorf("call %d started after its context ended", i) })
}
