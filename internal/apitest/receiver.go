package apitest

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Delivery is a request a Receiver got.
type Delivery struct {
	Path   string
	Header http.Header
	Body   []byte
}

// EventID is the delivery's X-Service-Event-Id.
func (d Delivery) EventID() string { return d.Header.Get("X-Service-Event-Id") }

// Receiver is a TLS webhook receiver that records what it gets and answers
// what its respond function says (200 when there is none).
type Receiver struct {
	t   testing.TB
	srv *httptest.Server
	got chan Delivery

	mu                    sync.Mutex
	n                     int                                // requests so far
	respond               func(n int, w http.ResponseWriter) // n counts from 1
	inFlight, maxInFlight int
	hold                  chan struct{} // when not nil, each request waits for it to close
}

// NewReceiver starts a Receiver, closed when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	rc := &Receiver{t: t, got: make(chan Delivery, 1000)}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rc.mu.Lock()
	rc.n++
	n, respond, hold := rc.n, rc.respond, rc.hold
	rc.inFlight++
	rc.maxInFlight = max(rc.maxInFlight, rc.inFlight)
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		rc.inFlight--
		rc.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	rc.got <- Delivery{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if respond != nil {
		respond(n, w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// SetRespond changes the receiver's answers: f writes the answer to the
// n-th request (nil answers 200).
func (rc *Receiver) SetRespond(f func(n int, w http.ResponseWriter)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.respond = f
}

// Hold makes each request that arrives from now on wait until hold is
// closed (or its client gives up) before it is recorded and answered; nil
// lets the next ones through at once.
func (rc *Receiver) Hold(hold chan struct{}) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.hold = hold
}

// InFlight returns how many requests the receiver is serving now, and the
// most it has served at once.
func (rc *Receiver) InFlight() (now, most int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.inFlight, rc.maxInFlight
}

// Got is the channel of the deliveries recorded and not yet taken, for a
// test that selects on it with something else.
func (rc *Receiver) Got() <-chan Delivery { return rc.got }

// Next returns the next delivery, failing the test when none comes within
// 5s.
func (rc *Receiver) Next() Delivery {
	rc.t.Helper()
	select {
	case d := <-rc.got:
		return d
	case <-time.After(5 * time.Second):
		rc.t.Fatal("no delivery within 5s")
	}
	return Delivery{}
}

// Quiet fails the test when a delivery arrives within d.
func (rc *Receiver) Quiet(d time.Duration) {
	rc.t.Helper()
	select {
	case got := <-rc.got:
		rc.t.Fatalf("unexpected delivery of %s: %s", got.EventID(), got.Body)
	case <-time.After(d):
	}
}

// URL is the receiver's URL for path.
func (rc *Receiver) URL(path string) string { return rc.srv.URL + path }

// Server is the receiver's server.
func (rc *Receiver) Server() *httptest.Server { return rc.srv }

// Trust makes a Service deliver to rc: private targets allowed, rc's
// certificate trusted. It is a Config mutation for New.
func (rc *Receiver) Trust(c *lifecycle.Config) {
	pool := x509.NewCertPool()
	pool.AddCert(rc.srv.Certificate())
	c.AllowPrivateWebhookTargets = true
	c.WebhookTLSConfig = &tls.Config{RootCAs: pool}
}
