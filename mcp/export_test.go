package mcp

// SubscribedTasksForTest returns how many tasks the sessions' subscriptions
// watch.
func (h *Handler) SubscribedTasksForTest() int {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	return len(h.subs.tasks)
}

// SetFastPathForTest turns the fast path of tool calls on or off: off,
// every request goes to the SDK's transport.
func (h *Handler) SetFastPathForTest(on bool) { h.noFast = !on }

// WaitSessionGoneForTest returns once the session of id is no longer live.
func (h *Handler) WaitSessionGoneForTest(id string) {
	if s := h.live.get(id); s != nil {
		<-s.gone
	}
}

// SessionsForTest returns how many sessions are live.
func (h *Handler) SessionsForTest() int { return h.live.count() }
