// Package hostbudget keeps account of a code host's rate limit as the host
// reports it on its answers, so that an adapter paces the requests it may
// put off (the reconciler's readings) within a share of the limit and
// keeps the rest for those it may not (writes, the reading right before a
// merge).
package hostbudget

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Priority says whether a request may be put off.
type Priority int

// The priorities.
const (
	// Urgent requests (writes, readings a caller or a merge waits for) use
	// all of the limit. It is the zero Priority.
	Urgent Priority = iota
	// Deferrable requests (the reconciler's readings) use at most the
	// Budget's share of the limit.
	Deferrable
)

// priorityKey carries a request's Priority in its context.
type priorityKey struct{}

// WithPriority returns ctx carrying p for the requests made with it.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf returns the Priority ctx carries: Urgent unless a sweep said
// otherwise, so that writes and the readings callers wait for come first.
func PriorityOf(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	return p
}

// State is what a host said of one of its rate limits on an answer.
type State struct {
	// Limit is the requests (or points) the window allows.
	Limit int
	// Remaining is what is left of it.
	Remaining int
	// Reset is when the window starts again with Limit.
	Reset time.Time
}

// Budget keeps the latest State of each of a host's rate limits (GitHub
// has one for its REST API and one for GraphQL). It is safe for
// concurrent use; the zero value is not: use New.
type Budget struct {
	share float64
	now   func() time.Time

	mu     sync.Mutex
	limits map[string]State
}

// New returns a Budget that lets deferrable requests use share (0 to 1]
// of each limit, telling the time with now.
func New(share float64, now func() time.Time) *Budget {
	return &Budget{share: share, now: now, limits: make(map[string]State)}
}

// Observe records what an answer said of the rate limit named resource.
// Answers may arrive out of order: within one window the lowest Remaining
// is kept, and a later window replaces an earlier one.
func (b *Budget) Observe(resource string, st State) {
	if st.Limit <= 0 || st.Reset.IsZero() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old, ok := b.limits[resource]
	switch {
	case !ok, st.Reset.After(old.Reset.Add(time.Second)):
		b.limits[resource] = st
	case !st.Reset.Before(old.Reset.Add(-time.Second)) && st.Remaining < old.Remaining:
		old.Remaining, old.Limit = st.Remaining, st.Limit
		b.limits[resource] = old
	}
}

// Spend counts n more requests (or points) against resource's limit, for a
// host that does not report what is left on every answer.
func (b *Budget) Spend(resource string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.limits[resource]; ok && b.now().Before(st.Reset) {
		st.Remaining = max(st.Remaining-n, 0)
		b.limits[resource] = st
	}
}

// Wait returns how long a request of priority p against resource must
// wait, or 0 when it may go now. A request goes when nothing is known of
// the limit yet, when its window has reset, and otherwise when what is
// left exceeds what p must leave: nothing for an urgent request, the part
// of the limit beyond the Budget's share for a deferrable one. Otherwise
// it waits for the reset.
func (b *Budget) Wait(resource string, p Priority) time.Duration {
	b.mu.Lock()
	st, ok := b.limits[resource]
	b.mu.Unlock()
	if !ok {
		return 0
	}
	wait := st.Reset.Sub(b.now())
	if wait <= 0 {
		return 0
	}
	reserve := 0
	if p == Deferrable {
		reserve = st.Limit - int(math.Floor(b.share*float64(st.Limit)))
	}
	if st.Remaining > reserve {
		return 0
	}
	return wait
}

// State returns what is known of resource's limit: the latest State an
// answer reported, with Remaining back at Limit once the window has reset.
func (b *Budget) State(resource string) (State, bool) {
	b.mu.Lock()
	st, ok := b.limits[resource]
	b.mu.Unlock()
	if ok && !b.now().Before(st.Reset) {
		st.Remaining = st.Limit
	}
	return st, ok
}

// Limit is what is known of one of a host's rate limits at a moment, as
// [Budget.Snapshot] reports it.
type Limit struct {
	// Resource names the limit as the adapter keeps it ("core",
	// "graphql" for GitHub).
	Resource string
	// State is as [Budget.State] reports it: Remaining is back at Limit
	// once the window has reset.
	State
	// ResetIn is the time left until Reset, never negative.
	ResetIn time.Duration
}

// Snapshot appends to dst what is known of each of the host's rate limits,
// in the order of their names, and returns the extended slice. It is what
// the adapters' rate-limit gauges read.
func (b *Budget) Snapshot(dst []Limit) []Limit {
	now := b.now()
	b.mu.Lock()
	start := len(dst)
	for resource, st := range b.limits {
		dst = append(dst, Limit{Resource: resource, State: st})
	}
	b.mu.Unlock()
	added := dst[start:]
	for i := range added {
		l := &added[i]
		if !now.Before(l.Reset) {
			l.Remaining = l.Limit
		} else {
			l.ResetIn = l.Reset.Sub(now)
		}
	}
	slices.SortFunc(added, func(x, y Limit) int { return strings.Compare(x.Resource, y.Resource) })
	return dst
}
