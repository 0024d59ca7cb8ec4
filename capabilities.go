package lifecycle

import "log/slog"

// storeCaps are the optional interfaces of the Service's Store, found once
// in [New]: a nil field is a capability the Store lacks, and the Service
// works without it as each interface's documentation says.
type storeCaps struct {
	classifier FailureClassifier   // nil: every failure of the Store is a 500
	relaxed    RelaxedUpdater      // nil: every commit waits for the disk
	queue      ShipQueueCounter    // nil: no lifecycle.ship.queue.depth gauge
	revisions  TaskRevisioner      // nil: no cache of GET /tasks/{id}
	leaser     InstanceLeaser      // nil: this Service is the Store's only one
	notifier   Notifier            // nil: other processes' commits are polled for
	resealer   SecretResealer      // nil: ResealWebhookSecrets cannot run
	sessions   ConsoleSessionStore // nil: no operator console
	queues     MergeQueueStore     // nil: no merge queue of the lifecycle's own
	counter    InProgressCounter   // nil: no Config.MaxInProgressPerAgent (New refuses it)
	stalls     StallMarker         // nil: Config.StallAfter cannot be set
	ciFailures CIFailureStore      // nil: no details of failed CI checks
}

// capabilities finds the optional interfaces st implements.
func capabilities(st Store) storeCaps {
	var c storeCaps
	c.classifier, _ = st.(FailureClassifier)
	c.relaxed, _ = st.(RelaxedUpdater)
	c.queue, _ = st.(ShipQueueCounter)
	c.revisions, _ = st.(TaskRevisioner)
	c.leaser, _ = st.(InstanceLeaser)
	c.notifier, _ = st.(Notifier)
	c.resealer, _ = st.(SecretResealer)
	c.sessions, _ = st.(ConsoleSessionStore)
	c.queues, _ = st.(MergeQueueStore)
	c.counter, _ = st.(InProgressCounter)
	c.stalls, _ = st.(StallMarker)
	c.ciFailures, _ = st.(CIFailureStore)
	return c
}

// logMissing logs, one line each, the capabilities the Store lacks that
// change what the Service does.
func (c storeCaps) logMissing(log *slog.Logger, instance string) {
	for _, m := range []struct {
		off  bool
		what string
	}{
		{c.classifier == nil, "the Store cannot tell a passing failure (lifecycle.FailureClassifier): every Store failure is answered 500, not 503 with Retry-After"},
		{c.leaser == nil, "the Store keeps no instance leases (lifecycle.InstanceLeaser): this Service must be the only one using it"},
		{c.notifier == nil, "the Store sends no change notifications (lifecycle.Notifier): commits of other processes are seen at the next poll"},
		{c.revisions == nil, "the Store keeps no task revisions (lifecycle.TaskRevisioner): answers of GET /tasks/{id} are not cached"},
		{c.queue == nil, "the Store does not count its ship queue (lifecycle.ShipQueueCounter): no lifecycle.ship.queue.depth gauge"},
		{c.resealer == nil, "the Store cannot reseal webhook secrets (lifecycle.SecretResealer): Service.ResealWebhookSecrets fails"},
		{c.ciFailures == nil, "the Store keeps no CI failure details (lifecycle.CIFailureStore): failed checks are served without them"},
		{c.sessions == nil, "the Store keeps no console sessions (lifecycle.ConsoleSessionStore): the API is served, the operator console (package console) cannot be"},
	} {
		if m.off {
			log.Info(m.what, "instance", instance)
		}
	}
}
