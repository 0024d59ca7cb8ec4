// Package shiprun is the ship runner: it works the ship operations that
// lifecycle.Service.Ship queues. It claims the runnable ones from the
// Store, up to Config.ShipConcurrency at a time (any number of processes
// may share the Store), renews each one's lease while it works it, and
// for each reads the host again, asks the state table whether the merge
// may go ahead, merges at the expected head (once: a merge whose answer
// was lost is recognised when the pull request is read again, never
// repeated), deploys, and records how it ended.
//
// The runner is built from what it uses (the Store transactions, the
// clock, telemetry, the deployer and the Config fields of shipping) and
// from [Tasks], the narrow part of the domain it needs: the task, the
// adapter of its pull request, a reading of the host, and the table's
// answers. The rules that move a task stay in package lifecycle, which
// implements Tasks and starts the runner.
package shiprun
