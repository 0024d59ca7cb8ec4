package lifecycle

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/claimrun"
)

// instanceRenewal is how often a Service renews its instance lease; the
// lease lasts three renewals.
const instanceRenewal = time.Second

// claimInstance takes the instance lease of s.owner for this life. When a
// lease of another life holds it, it waits until that lease ends: if it is
// renewed meanwhile, a live process holds the ID, and claimInstance fails
// with ErrInstanceInUse; if not, its holder is dead (a crash), and its work
// is taken over. A Store without instance leases has no other life to wait
// for: the Service holds its ID at once.
func (s *Service) claimInstance(ctx context.Context) error {
	if s.caps.leaser == nil {
		s.lease.set(time.Unix(0, math.MaxInt64)) // the only instance, as long as it runs
		return nil
	}
	var seen InstanceLease // the other life's lease, as first read
	for {
		var (
			held  InstanceLease
			until time.Time
		)
		err := s.caps.leaser.UpdateInstanceLease(ctx, UpdateInstanceLeaseParams{ID: s.owner, Update: func(cur *InstanceLease) (*InstanceLease, error) {
			held = InstanceLease{}
			now := s.clock.Now()
			if cur != nil && cur.Life != s.life && cur.Until.After(now) { // a lease ends at its Until
				held = *cur
				return nil, nil
			}
			until = now.Add(3 * instanceRenewal)
			return &InstanceLease{ID: s.owner, Life: s.life, Until: until}, nil
		}})
		switch {
		case err != nil:
			return fmt.Errorf("lifecycle: claim instance %s: %w", s.owner, err)
		case held.Life == "":
			s.lease.set(until)
			return nil
		case seen.Life == held.Life && !seen.Until.Equal(held.Until):
			return fmt.Errorf("lifecycle: Config.InstanceID %q: another process renewed its lease while this one waited: %w; give each process its own ID",
				s.owner, ErrInstanceInUse)
		}
		// Wait for the lease to end: a live holder renews it every
		// instanceRenewal, a dead one does not.
		seen = held
		s.log.Warn("another life of this instance holds its lease; waiting for it to end", "instance", s.owner, "until", held.Until)
		if !s.pause(ctx, held.Until.Sub(s.clock.Now())+time.Millisecond) {
			return ctx.Err()
		}
	}
}

// renewInstance renews the instance lease every instanceRenewal until ctx
// ends, then gives it up, so that a restart need not wait for it. Without
// instance leases it has nothing to do.
func (s *Service) renewInstance(ctx context.Context) {
	if s.caps.leaser == nil {
		return
	}
	claimrun.Renew(ctx, s.clock, instanceRenewal, func(ctx context.Context) bool {
		s.putInstance(ctx, s.clock.Now().Add(3*instanceRenewal))
		return true // a failure is logged; the next renewal tries again
	})
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.putInstance(rctx, s.clock.Now())
}

// putInstance sets the end of this life's instance lease, unless another
// life holds it.
func (s *Service) putInstance(ctx context.Context, until time.Time) {
	// Losing a renewal in a power cut is harmless: its holder dies with it.
	err := s.caps.leaser.UpdateInstanceLease(ctx, UpdateInstanceLeaseParams{ID: s.owner, Relaxed: true, Update: func(cur *InstanceLease) (*InstanceLease, error) {
		if cur != nil && cur.Life != s.life {
			return nil, fmt.Errorf("life %s took the lease over: %w", cur.Life, ErrInstanceInUse)
		}
		return &InstanceLease{ID: s.owner, Life: s.life, Until: until}, nil
	}})
	switch {
	case err == nil:
		s.lease.set(until)
	case ctx.Err() == nil:
		s.log.Error("renew the instance lease", "instance", s.owner, "err", err)
	}
}
