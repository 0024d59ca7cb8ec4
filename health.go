package lifecycle

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
)

// Health is the body of GET /healthz and GET /readyz.
type Health struct {
	// Status is "ok" (healthz: the process serves), "ready" or
	// "not_ready" (readyz).
	Status string `json:"status"`
	// Checks says, for readyz, what was checked: "store" (ok, or why the
	// Store did not answer) and "instanceLease" (held, not_held,
	// not_started, closed).
	Checks map[string]string `json:"checks,omitempty"`
}

// readyTimeout bounds the Store's answer to a readiness check.
const readyTimeout = 2 * time.Second

// handleHealthz answers GET /healthz, without a key: the process is alive
// and serves requests.
func handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusOK, Health{Status: "ok"})
}

// handleReadyz answers GET /readyz, without a key: 200 when the Service
// can do its work (the Store answers within 2 s, and a started Service
// holds its instance lease), 503 with Retry-After otherwise. The checks
// say which part failed.
func (s *Service) handleReadyz(w http.ResponseWriter, r *http.Request) {
	h := s.Health(r.Context())
	w.Header().Set("Cache-Control", "no-store")
	status := http.StatusOK
	if h.Status != "ready" {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", httpapi.StoreRetryAfter)
	}
	httpapi.WriteJSON(w, status, h)
}

// Health reports whether the Service can do its work, for hosts with
// probes of their own (GET /readyz serves the same): its Store answers
// (within 2 s) and, once [Service.Start] was called, it holds its
// instance lease ([Config.InstanceID]), which it renews every second and
// loses when the Store cannot be written for three. Status is "ready" or
// "not_ready"; Checks say which part failed.
func (s *Service) Health(ctx context.Context) Health {
	h := Health{Status: "ready", Checks: map[string]string{"store": "ok"}}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := s.store.EventBounds(ctx); err != nil {
		h.Status, h.Checks["store"] = "not_ready", "unavailable"
		s.log.WarnContext(ctx, "readiness: the store does not answer", "err", err)
	}
	s.mu.Lock()
	started, closed := s.started, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		h.Status, h.Checks["instanceLease"] = "not_ready", "closed"
	case !started:
		h.Status, h.Checks["instanceLease"] = "not_ready", "not_started"
	case !s.lease.held(s.clock.Now()):
		h.Status, h.Checks["instanceLease"] = "not_ready", "not_held"
	default:
		h.Checks["instanceLease"] = "held"
	}
	return h
}

// leaseClock remembers until when this life holds its instance lease, as
// last written to the Store.
type leaseClock struct{ until atomic.Int64 } // Unix nanoseconds

func (l *leaseClock) set(until time.Time) { l.until.Store(until.UnixNano()) }

func (l *leaseClock) held(now time.Time) bool { return now.UnixNano() < l.until.Load() }
