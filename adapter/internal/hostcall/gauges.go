package hostcall

import (
	"context"
	"reflect"
	"runtime"
	"sync"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
)

// The rate-limit gauges are observed by one callback per MeterProvider and
// scope, shared by the adapters made with them: lifecycle.host and
// lifecycle.host.resource are their only attributes, so several adapters
// of one host (one per repository) report one value per limit, the
// lowest Remaining of them, with its reset. An adapter no longer used is
// dropped from the gauges, and the callback unregistered once no adapter
// uses it.

// gaugeKey identifies the gauges of a MeterProvider and scope.
type gaugeKey struct {
	mp    metric.MeterProvider
	scope string
}

// registry holds the gauges in use, weakly: each Telemetry holds its own.
var registry = struct {
	mu sync.Mutex
	m  map[gaugeKey]weak.Pointer[gauges]
}{m: make(map[gaugeKey]weak.Pointer[gauges])}

// gauges are the rate-limit gauges of a MeterProvider and scope, and the
// budgets they read.
type gauges struct {
	remaining metric.Int64ObservableGauge
	reset     metric.Float64ObservableGauge

	mu      sync.Mutex
	watched []watched
	buf     []hostbudget.Limit
}

// watched is a budget the gauges read.
type watched struct {
	host   attribute.KeyValue
	budget weak.Pointer[hostbudget.Budget]
	keep   func(resource string) bool
}

// ObserveRateLimits reports the rate limits b keeps account of in
// lifecycle.host.rate_limit.remaining and lifecycle.host.rate_limit.reset,
// per lifecycle.host and lifecycle.host.resource (the limit's name in b),
// those for which keep returns true (all when keep is nil). b is read as
// long as it is in use, without being kept from the garbage collector.
func (t *Telemetry) ObserveRateLimits(b *hostbudget.Budget, keep func(resource string) bool) {
	g := gaugesOf(t.mp, t.scope)
	g.mu.Lock()
	g.watched = append(g.watched, watched{host: t.host, budget: weak.Make(b), keep: keep})
	g.mu.Unlock()
	t.gauges = g
}

// gaugesOf returns the gauges of mp and scope, made and registered on
// first use.
func gaugesOf(mp metric.MeterProvider, scope string) *gauges {
	if !reflect.TypeOf(mp).Comparable() {
		g, _ := newGauges(mp, scope)
		return g
	}
	key := gaugeKey{mp, scope}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if g := registry.m[key].Value(); g != nil {
		return g
	}
	g, reg := newGauges(mp, scope)
	wp := weak.Make(g)
	registry.m[key] = wp
	runtime.AddCleanup(g, func(c cleanup) {
		registry.mu.Lock()
		if registry.m[c.key] == c.wp {
			delete(registry.m, c.key)
		}
		registry.mu.Unlock()
		if c.reg != nil {
			handle(c.reg.Unregister())
		}
	}, cleanup{key: key, wp: wp, reg: reg})
	return g
}

// cleanup is what is undone once the gauges are no longer used.
type cleanup struct {
	key gaugeKey
	wp  weak.Pointer[gauges]
	reg metric.Registration
}

// newGauges makes the gauges of mp and scope and registers their
// callback, which holds them weakly.
func newGauges(mp metric.MeterProvider, scope string) (*gauges, metric.Registration) {
	meter := mp.Meter(scope)
	g := &gauges{}
	var err error
	g.remaining, err = meter.Int64ObservableGauge("lifecycle.host.rate_limit.remaining",
		metric.WithUnit("{request}"),
		metric.WithDescription("What is left of the code host's rate limit in its current window, as the host last reported it."))
	handle(err)
	g.reset, err = meter.Float64ObservableGauge("lifecycle.host.rate_limit.reset",
		metric.WithUnit("s"),
		metric.WithDescription("Seconds until the code host's rate limit window resets; 0 once it has."))
	handle(err)
	wg := weak.Make(g)
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if g := wg.Value(); g != nil {
			g.observe(o)
		}
		return nil
	}, g.remaining, g.reset)
	handle(err)
	return g, reg
}

// observe reports the lowest Remaining of each host's limit, with its
// reset, and forgets the budgets no longer in use.
func (g *gauges) observe(o metric.Observer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	type lowest struct {
		host attribute.KeyValue
		hostbudget.Limit
	}
	var out []lowest
	live := g.watched[:0]
	for _, w := range g.watched {
		b := w.budget.Value()
		if b == nil {
			continue
		}
		live = append(live, w)
		g.buf = b.Snapshot(g.buf[:0])
	next:
		for _, l := range g.buf {
			if w.keep != nil && !w.keep(l.Resource) {
				continue
			}
			for i := range out {
				if out[i].host == w.host && out[i].Resource == l.Resource {
					if l.Remaining < out[i].Remaining {
						out[i].Limit = l
					}
					continue next
				}
			}
			out = append(out, lowest{host: w.host, Limit: l})
		}
	}
	clear(g.watched[len(live):])
	g.watched = live
	for _, l := range out {
		attrs := metric.WithAttributeSet(attribute.NewSet(l.host, KeyResource.String(l.Resource)))
		o.ObserveInt64(g.remaining, int64(l.Remaining), attrs)
		o.ObserveFloat64(g.reset, l.ResetIn.Seconds(), attrs)
	}
}
