package artifact

// QueueCheckDone returns a channel closed once the check of the merge
// queue candidate sha of repository repo has finished, or nil when no
// check of it is known.
func (a *Adapter) QueueCheckDone(repo, sha string) <-chan struct{} {
	a.queue.mu.Lock()
	defer a.queue.mu.Unlock()
	if run := a.queue.runs[candidateKey(repo, sha)]; run != nil {
		return run.done
	}
	return nil
}
