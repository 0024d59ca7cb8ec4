package lifecycle

import (
	"net/http"
	"sync/atomic"
)

// startCheck logs, once, that a Service serves requests though Start was
// not called: ship operations then stay queued and webhooks are not
// delivered.
type startCheck struct{ done atomic.Bool }

func (c *startCheck) check(s *Service, r *http.Request) {
	if c.done.Load() {
		return
	}
	s.mu.Lock()
	started, closed := s.started, s.closed
	s.mu.Unlock()
	if started || closed {
		c.done.Store(true)
	} else if c.done.CompareAndSwap(false, true) {
		s.log.WarnContext(r.Context(), "lifecycle: the Service serves requests but Service.Start was not called: "+
			"ship operations stay queued, webhooks are not delivered and old events are not pruned until it is")
	}
}
