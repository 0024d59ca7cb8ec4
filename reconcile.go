package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/dueloop"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
)

// This file is the reconciler's loop: it reads the host again for every
// task in review on a schedule, so that a lost webhook delays a fact but
// never loses it. What a reading is applied with, and the entry points of
// webhooks ([Service.ApplyProviderEvent], [Service.QueueProviderEvent]),
// are in facts.go.

// reconcileChunk is how many due tasks the reconciler claims at a time;
// each adapter's share of them goes to its BatchReader in one call.
const reconcileChunk = 500

// reconciler reads the host again for every task in review when its
// ReconcileAt has come: at each beat of ReconcileInterval for all of them
// (a sweep), and at once for those a webhook made due. Claims go through
// the Store, so Services sharing one read each task once per beat.
type reconciler struct {
	cfg  reconcilerConfig
	beat *dueloop.Beat
	read int // tasks read by the sweep under way, for lifecycle.reconcile.sweep.tasks
}

// reconcileTasks is what the reconciler asks of the domain: the host's
// facts, the adapter binding a task's readings are batched by, and the
// facts of a reading that found nothing new applied in a transaction of
// its own. The Service implements it.
type reconcileTasks interface {
	hostFacts
	// binding returns the binding live for a project, or nil.
	binding(project string) *AdapterBinding
	// applyFacts applies what a reading found to t in tx, and returns the
	// events it causes.
	applyFacts(ctx context.Context, tx Tx, t *Task, obs observation, quiet bool) ([]taskEvent, error)
}

// reconcilerConfig is what a reconciler is built from: its dependencies,
// and the Config fields of reconciling.
type reconcilerConfig struct {
	// Tasks reads the hosts for tasks and applies what they said.
	Tasks reconcileTasks
	// UpdateRelaxed runs a Store transaction that need not wait for the
	// disk: a claim or a schedule lost in a power cut is only read again.
	UpdateRelaxed func(ctx context.Context, fn func(tx Tx) error) error
	Clock         Clock
	Log           *slog.Logger
	Tel           *telemetry.Telemetry

	// The Config fields of the same names, their defaults filled in.
	ReconcileInterval     time.Duration
	ReconcilePollInterval time.Duration
	ProviderTimeout       time.Duration
}

// newReconciler returns a reconciler; it does nothing until run.
func newReconciler(cfg reconcilerConfig) *reconciler {
	return &reconciler{cfg: cfg, beat: dueloop.New(cfg.Clock, cfg.ReconcileInterval, cfg.ReconcilePollInterval)}
}

// nextSweep is Service.nextSweep, for the reconciler.
func (r *reconciler) nextSweep(now time.Time) Timestamp {
	return NewTimestamp(dueloop.Next(now, r.cfg.ReconcileInterval))
}

// wakeUp makes the reconciler look for due tasks now.
func (r *reconciler) wakeUp() { r.beat.Wake() }

// run reconciles until ctx ends. A sweep that outlasts the interval delays
// the next one: the tasks due meanwhile are read as soon as it ends.
func (r *reconciler) run(ctx context.Context) { r.beat.Run(ctx, r.sweep) }

// sweep reads every task due now, reconcileChunk at a time.
// A sweep that read tasks is measured.
func (r *reconciler) sweep(ctx context.Context) {
	start := r.cfg.Clock.Now()
	r.read = 0
	if err := dueloop.Drain(ctx, reconcileChunk, r.claim, r.readTasks); err != nil && ctx.Err() == nil {
		r.cfg.Log.Error("claim tasks to reconcile", "err", err)
	}
	if r.read > 0 {
		r.cfg.Tel.Swept(ctx, r.cfg.Clock.Now().Sub(start), r.read)
	}
}

// claim claims up to limit due tasks, leased until their reading must be
// over: a reading of all of them in one batch, after an interval's wait.
func (r *reconciler) claim(ctx context.Context, limit int) ([]Task, error) {
	c := &r.cfg
	var claimed []Task
	// A claim lost in a power cut only makes the tasks due again.
	err := c.UpdateRelaxed(ctx, func(tx Tx) error {
		now := c.Clock.Now()
		tasks, err := tx.ClaimReconciliations(ctx, ClaimReconciliationsParams{
			Now: now, Until: now.Add(c.ReconcileInterval + batchReadTimeout(c.ProviderTimeout, limit)), Limit: limit,
		})
		claimed = tasks
		return err
	})
	return claimed, err
}

// readTasks reads claimed tasks: those of each adapter binding together,
// the bindings at once.
func (r *reconciler) readTasks(ctx context.Context, tasks []Task) {
	c := &r.cfg
	type group struct {
		adapter ProviderAdapter
		tasks   []Task
	}
	var groups []*group
	byKey := map[any]*group{}
	var idle []Task // no longer read: they leave the queue
	for _, t := range tasks {
		if !readable(&t) {
			idle = append(idle, t)
			continue
		}
		adapter, err := c.Tasks.adapterFor(&t, t.SubmissionMode)
		if err != nil {
			c.Log.Warn("reconcile task: no adapter; it is read again next interval", "task", t.ID, "err", err)
			continue
		}
		var key any = ModeArtifact
		if t.SubmissionMode != ModeArtifact {
			key = c.Tasks.binding(t.Project())
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
	r.reschedule(ctx, idle, Timestamp{})
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
func (r *reconciler) readGroup(ctx context.Context, adapter ProviderAdapter, tasks []Task) {
	c := &r.cfg
	reads, err := c.Tasks.readHost(ctx, adapter, tasks, ReadSweep)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if wait, ok := rateLimited(err); ok {
			c.Log.Info("the share of the code host's rate limit kept for readings is spent; the tasks are read again when it resets",
				"tasks", len(tasks), "wait", wait)
			r.reschedule(ctx, tasks, NewTimestamp(c.Clock.Now().Add(wait)))
			return
		}
		c.Log.Warn("read the code host; the tasks are read again next interval", "tasks", len(tasks), "err", err)
		return
	}
	var unchanged []unchangedRead
	for i, rd := range reads {
		t := &tasks[i]
		sc := schedule{from: t.ReconcileAt, next: r.nextSweep(c.Clock.Now())}
		switch {
		case rd.err != nil:
			if ctx.Err() == nil {
				c.Log.Warn("reconcile task; it is read again next interval", "task", t.ID, "err", rd.err)
			}
		case rd.obs.unchanged:
			unchanged = append(unchanged, unchangedRead{task: *t, obs: rd.obs})
		default:
			again, err := c.Tasks.applyObservation(ctx, t.ID, t.PullRequestRef(), rd.obs, hint{}, sc)
			if err != nil && ctx.Err() == nil {
				c.Log.Warn("apply what the code host said of a task; it is read again next interval", "task", t.ID, "err", err)
			}
			if again {
				r.wakeUp() // hinted at during the reading: due again, in full
			}
		}
	}
	r.markUnchanged(ctx, unchanged)
}

// unchangedRead is a reading that found nothing new for task.
type unchangedRead struct {
	task Task
	obs  observation
}

// markUnchanged records, in one transaction, that the host had nothing
// new for the tasks of reads, keeps the Versions the adapter gave, and
// schedules their next reading.
func (r *reconciler) markUnchanged(ctx context.Context, reads []unchangedRead) {
	if len(reads) == 0 {
		return
	}
	c := &r.cfg
	err := c.UpdateRelaxed(ctx, func(tx Tx) error {
		now := NewTimestamp(c.Clock.Now())
		sc := schedule{next: r.nextSweep(now.Time)}
		for _, rd := range reads {
			t := &rd.task
			cur, err := tx.Task(ctx, t.ID)
			if err != nil {
				return fmt.Errorf("get task %s: %w", t.ID, err)
			}
			if cur.PullRequestRef() != t.PullRequestRef() || cur.Facts.HostVersion != t.Facts.HostVersion || rd.obs.predates(&cur) || !readable(&cur) {
				continue // changed or hinted at meanwhile: it is read again
			}
			if _, err := c.Tasks.applyFacts(ctx, tx, &cur, rd.obs, true); err != nil {
				return err
			}
			sc.from = t.ReconcileAt
			sc.apply(&cur)
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
func (r *reconciler) reschedule(ctx context.Context, tasks []Task, at Timestamp) {
	if len(tasks) == 0 {
		return
	}
	c := &r.cfg
	err := c.UpdateRelaxed(ctx, func(tx Tx) error {
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
