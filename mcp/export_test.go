package mcp

// SubscribedTasksForTest returns how many tasks the sessions' subscriptions
// watch.
func (h *Handler) SubscribedTasksForTest() int {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	return len(h.subs.tasks)
}
