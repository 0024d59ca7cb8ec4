package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/dueloop"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// chunk is how many due tasks the reconciler claims at a time; each
// adapter's share of them goes to its BatchReader in one call.
const chunk = 500

// Tasks is what a Reconciler asks of the domain: which tasks it reads,
// their adapters, a reading of the host for tasks, and what a reading
// found applied. R is the domain's reading of one task; the Reconciler
// only hands it back.
type Tasks[R any] interface {
	// Readable reports whether the reconciler reads t; a claimed task it
	// does not read leaves the queue.
	Readable(t *lifecycletype.Task) bool
	// AdapterFor returns the adapter that handles t's pull request, or an
	// error when none does, and the key of its batch: the tasks of equal
	// keys (comparable; those of one adapter binding) are read together.
	AdapterFor(t *lifecycletype.Task) (adapter lifecycletype.ProviderAdapter, batch any, err error)
	// ReadTimeout bounds a reading of n tasks together.
	ReadTimeout(n int) time.Duration
	// ReadHost reads the host for tasks, which all have adapter, for a
	// sweep: a task's stored HostVersion lets the adapter answer that
	// nothing changed. It returns one Result per task, or the error of a
	// reading that read nothing (a *TemporaryError that is RateLimited
	// when the host's rate limit is spent).
	ReadHost(ctx context.Context, adapter lifecycletype.ProviderAdapter, tasks []lifecycletype.Task) ([]Result[R], error)
	// Apply stores what a reading that found something new found for t,
	// with the events it causes, and schedules t's next reading at next
	// unless a webhook made it due meanwhile. It reports whether the host
	// hinted at a change while it read: t is then due again, in full.
	Apply(ctx context.Context, t *lifecycletype.Task, r R, next lifecycletype.Timestamp) (again bool, err error)
	// ApplyUnchanged applies, in tx, a reading that found nothing new to
	// cur, the task as stored now. It reports false, having changed
	// nothing, when cur is no longer read or was hinted at since the
	// reading began: it is read again.
	ApplyUnchanged(ctx context.Context, tx lifecycletype.Tx, cur *lifecycletype.Task, r R) (bool, error)
}

// Result is the reading of one task: what it found, or why it failed.
type Result[R any] struct {
	// Reading is what the host said, for Tasks.Apply or
	// Tasks.ApplyUnchanged.
	Reading R
	// Unchanged says the host had nothing new for the task.
	Unchanged bool
	// Err says why the task could not be read; Reading is then unset.
	Err error
}

// Config is what a Reconciler is built from: its dependencies, and the
// lifecycle.Config fields of reconciling.
type Config[R any] struct {
	// Tasks reads the host for tasks and applies what it said.
	Tasks Tasks[R]
	// UpdateRelaxed runs a Store transaction that need not wait for the
	// disk: a claim or a schedule lost in a power cut is only read again.
	UpdateRelaxed func(ctx context.Context, fn func(tx lifecycletype.Tx) error) error
	// Clock tells the time and waits for it.
	Clock lifecycletype.Clock
	// Log takes what went wrong; the tasks concerned are read again.
	Log *slog.Logger
	// Tel measures the sweeps.
	Tel *telemetry.Telemetry

	// The lifecycle.Config fields of the same names, their defaults
	// filled in.
	ReconcileInterval     time.Duration
	ReconcilePollInterval time.Duration
}

// Reconciler reads the host again for every task in review when its
// ReconcileAt has come: at each beat of ReconcileInterval for all of them
// (a sweep), and at once for those a webhook made due. Claims go through
// the Store, so processes sharing one read each task once per beat.
type Reconciler[R any] struct {
	cfg  Config[R]
	beat *dueloop.Beat
	read int // tasks read by the sweep under way, for lifecycle.reconcile.sweep.tasks
}

// New returns a Reconciler; it does nothing until Run.
func New[R any](cfg Config[R]) *Reconciler[R] {
	return &Reconciler[R]{cfg: cfg, beat: dueloop.New(cfg.Clock, cfg.ReconcileInterval, cfg.ReconcilePollInterval)}
}

// Wake makes the reconciler look for due tasks now, or as soon as the
// sweep under way ends.
func (r *Reconciler[R]) Wake() { r.beat.Wake() }

// Run reconciles until ctx ends. A sweep that outlasts the interval delays
// the next one: the tasks due meanwhile are read as soon as it ends.
func (r *Reconciler[R]) Run(ctx context.Context) { r.beat.Run(ctx, r.sweep) }

// NextSweep returns when a task read at now is read next: at the next
// multiple of ReconcileInterval (counted from the zero time, so every
// Service sharing a Store keeps the same beat). Readings of many tasks so
// fall due together and go to the host in batches, and a task is read at
// most ReconcileInterval after its last reading.
func (r *Reconciler[R]) NextSweep(now time.Time) lifecycletype.Timestamp {
	return lifecycletype.NewTimestamp(dueloop.Next(now, r.cfg.ReconcileInterval))
}

// sweep reads every task due now, chunk at a time. A sweep that read
// tasks is measured.
func (r *Reconciler[R]) sweep(ctx context.Context) {
	start := r.cfg.Clock.Now()
	r.read = 0
	if err := dueloop.Drain(ctx, chunk, r.claim, r.readTasks); err != nil && ctx.Err() == nil {
		r.cfg.Log.Error("claim tasks to reconcile", "err", err)
	}
	if r.read > 0 {
		r.cfg.Tel.Swept(ctx, r.cfg.Clock.Now().Sub(start), r.read)
	}
}

// claim claims up to limit due tasks, leased until their reading must be
// over: a reading of all of them in one batch, after an interval's wait.
func (r *Reconciler[R]) claim(ctx context.Context, limit int) ([]lifecycletype.Task, error) {
	c := &r.cfg
	var claimed []lifecycletype.Task
	// A claim lost in a power cut only makes the tasks due again.
	err := c.UpdateRelaxed(ctx, func(tx lifecycletype.Tx) error {
		now := c.Clock.Now()
		tasks, err := tx.ClaimReconciliations(ctx, lifecycletype.ClaimReconciliationsParams{
			Now: now, Until: now.Add(c.ReconcileInterval + c.Tasks.ReadTimeout(limit)), Limit: limit,
		})
		claimed = tasks
		return err
	})
	return claimed, err
}

// readTasks reads claimed tasks: those of each adapter binding together,
// the bindings at once.
func (r *Reconciler[R]) readTasks(ctx context.Context, tasks []lifecycletype.Task) {
	c := &r.cfg
	type group struct {
		adapter lifecycletype.ProviderAdapter
		tasks   []lifecycletype.Task
	}
	var groups []*group
	byKey := map[any]*group{}
	var idle []lifecycletype.Task // no longer read: they leave the queue
	for _, t := range tasks {
		if !c.Tasks.Readable(&t) {
			idle = append(idle, t)
			continue
		}
		adapter, key, err := c.Tasks.AdapterFor(&t)
		if err != nil {
			c.Log.Warn("reconcile task: no adapter; it is read again next interval", "task", t.ID, "err", err)
			continue
		}
		g := byKey[key]
		if g == nil {
			g = &group{adapter: adapter}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.tasks = append(g.tasks, t)
		r.read++
	}
	r.reschedule(ctx, idle, lifecycletype.Timestamp{})
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.readGroup(ctx, g.adapter, g.tasks)
		}()
	}
	wg.Wait()
}

// readGroup reads tasks that share adapter, and applies what it read.
func (r *Reconciler[R]) readGroup(ctx context.Context, adapter lifecycletype.ProviderAdapter, tasks []lifecycletype.Task) {
	c := &r.cfg
	reads, err := c.Tasks.ReadHost(ctx, adapter, tasks)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if wait, ok := lifecycletype.RateLimitWait(err); ok {
			c.Log.Info("the share of the code host's rate limit kept for readings is spent; the tasks are read again when it resets",
				"tasks", len(tasks), "wait", wait)
			r.reschedule(ctx, tasks, lifecycletype.NewTimestamp(c.Clock.Now().Add(wait)))
			return
		}
		c.Log.Warn("read the code host; the tasks are read again next interval", "tasks", len(tasks), "err", err)
		return
	}
	var unchanged []unchangedRead[R]
	for i, rd := range reads {
		t := &tasks[i]
		switch {
		case rd.Err != nil:
			if ctx.Err() == nil {
				c.Log.Warn("reconcile task; it is read again next interval", "task", t.ID, "err", rd.Err)
			}
		case rd.Unchanged:
			unchanged = append(unchanged, unchangedRead[R]{task: *t, reading: rd.Reading})
		default:
			again, err := c.Tasks.Apply(ctx, t, rd.Reading, r.NextSweep(c.Clock.Now()))
			if err != nil && ctx.Err() == nil {
				c.Log.Warn("apply what the code host said of a task; it is read again next interval", "task", t.ID, "err", err)
			}
			if again {
				r.Wake() // hinted at during the reading: due again, in full
			}
		}
	}
	r.markUnchanged(ctx, unchanged)
}

// unchangedRead is a reading that found nothing new for task.
type unchangedRead[R any] struct {
	task    lifecycletype.Task
	reading R
}

// markUnchanged records, in one transaction, that the host had nothing
// new for the tasks of reads, and schedules their next reading.
func (r *Reconciler[R]) markUnchanged(ctx context.Context, reads []unchangedRead[R]) {
	if len(reads) == 0 {
		return
	}
	c := &r.cfg
	err := c.UpdateRelaxed(ctx, func(tx lifecycletype.Tx) error {
		next := r.NextSweep(lifecycletype.NewTimestamp(c.Clock.Now()).Time)
		for _, rd := range reads {
			t := &rd.task
			cur, err := tx.Task(ctx, t.ID)
			if err != nil {
				return fmt.Errorf("get task %s: %w", t.ID, err)
			}
			if cur.PullRequestRef() != t.PullRequestRef() || cur.Facts.HostVersion != t.Facts.HostVersion {
				continue // changed meanwhile: it is read again
			}
			if ok, err := c.Tasks.ApplyUnchanged(ctx, tx, &cur, rd.reading); err != nil || !ok {
				if err != nil {
					return err
				}
				continue // hinted at meanwhile, or no longer read
			}
			if cur.ReconcileAt.Equal(t.ReconcileAt.Time) {
				cur.ReconcileAt = next // unless a webhook made it due meanwhile
			}
			if err := tx.UpdateTask(ctx, cur); err != nil {
				return fmt.Errorf("update task %s: %w", t.ID, err)
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		c.Log.Warn("record readings that found nothing new; the tasks are read again next interval", "tasks", len(reads), "err", err)
	}
}

// reschedule sets the next reading of claimed tasks to at (zero: never,
// for tasks the reconciler no longer reads), unless a webhook made them
// due again meanwhile.
func (r *Reconciler[R]) reschedule(ctx context.Context, tasks []lifecycletype.Task, at lifecycletype.Timestamp) {
	if len(tasks) == 0 {
		return
	}
	c := &r.cfg
	err := c.UpdateRelaxed(ctx, func(tx lifecycletype.Tx) error {
		for _, t := range tasks {
			cur, err := tx.Task(ctx, t.ID)
			if err != nil {
				return fmt.Errorf("get task %s: %w", t.ID, err)
			}
			if !cur.ReconcileAt.Equal(t.ReconcileAt.Time) {
				continue
			}
			cur.ReconcileAt = at
			if err := tx.UpdateTask(ctx, cur); err != nil {
				return fmt.Errorf("update task %s: %w", t.ID, err)
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		c.Log.Warn("reschedule the readings of tasks", "tasks", len(tasks), "err", err)
	}
}
