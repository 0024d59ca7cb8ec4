package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/dueloop"
)

// stallBatch is the most tasks one statement of a sweep marks stalled; a
// sweep goes on while a statement marks that many.
const stallBatch = 500

// stallStatuses are the statuses Config.StallAfter may watch, in the
// order of the rules a sweep passes to the Store.
var stallStatuses = []Status{StatusInProgress, StatusInReview}

// validateStallAfter checks Config.StallAfter.
func (c *Config) validateStallAfter() error {
	for st, d := range c.StallAfter {
		if !slices.Contains(stallStatuses, st) {
			return fmt.Errorf("lifecycle: Config.StallAfter names status %q; only in_progress and in_review may stall", st)
		}
		if d < time.Second {
			return fmt.Errorf("lifecycle: Config.StallAfter[%s] is %s; give at least 1s, or leave the status out", st, d)
		}
	}
	return nil
}

// stallInterval is how often the Service looks for stalled tasks: a
// tenth of the shortest duration of Config.StallAfter, from 1 second to
// 1 minute. A task is marked at most that long after it became due.
func stallInterval(after map[Status]time.Duration) time.Duration {
	shortest := time.Duration(0)
	for _, d := range after {
		if shortest == 0 || d < shortest {
			shortest = d
		}
	}
	return min(max(shortest/10, time.Second), time.Minute)
}

// watchesStall reports whether tasks in status st may stall.
func (s *Service) watchesStall(st Status) bool {
	_, ok := s.cfg.StallAfter[st]
	return ok
}

// stallLoop marks stalled tasks at each beat of stallInterval, until ctx
// ends. Every replica sharing the Store runs it; the Store marks each
// task once (see StallMarker).
func (s *Service) stallLoop(ctx context.Context) {
	iv := stallInterval(s.cfg.StallAfter)
	dueloop.New(s.clock, iv, iv).Run(ctx, func(ctx context.Context) {
		if _, err := s.sweepStalls(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("mark stalled tasks; tried again at the next sweep", "err", err)
		}
	})
}

// sweepStalls marks the tasks due to stall and emits task.stalled for
// each, in the transaction that marks them: one statement of the Store
// per stallBatch tasks marked, and none per task that is not due. It
// returns how many it marked.
func (s *Service) sweepStalls(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		now := s.now()
		p := MarkStalledParams{Now: now.Time, Limit: stallBatch}
		for _, st := range stallStatuses {
			if d, ok := s.cfg.StallAfter[st]; ok {
				p.Rules = append(p.Rules, StallRule{Status: st, Before: now.Add(-d)})
			}
		}
		var marked []Task
		run := func(ctx context.Context, fn func(tx Tx) error) error {
			return s.caps.stalls.MarkStalled(ctx, p, func(tx Tx, m []Task) error {
				marked = m
				return fn(tx)
			})
		}
		err := s.transactOn(ctx, run, func(tx Tx) error {
			if err := s.countAgents(ctx, tx, marked); err != nil {
				return err
			}
			for i := range marked {
				t := &marked[i]
				s.setActions(t)
				ev := taskEvent{typ: EventTaskStalled, stallAfter: s.cfg.StallAfter[t.Status],
					summary: fmt.Sprintf("Task %s stalled: no activity in %s since %s", t.Identifier, t.Status, t.LastActivityAt)}
				if err := s.appendTaskEvent(ctx, tx, ev, nil, t); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("mark stalled tasks: %w", err)
		}
		if len(marked) > 0 {
			s.broker.Wake()
		}
		total += len(marked)
		if len(marked) < stallBatch {
			break
		}
	}
	return total, nil
}
