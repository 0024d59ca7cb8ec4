package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// queueInstruments are the merge queue's instruments.
type queueInstruments struct {
	timeInQueue metric.Float64Histogram
	runs        metric.Int64Counter
	batches     metric.Int64Counter
	bisection   metric.Int64Histogram
	outcomes    *attrCache[string]
	results     *attrCache[candidateResult]
}

// candidateResult is a tested candidate's kind and result.
type candidateResult struct{ kind, result string }

func candidateResultAttributes(c candidateResult) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("lifecycle.merge_queue.kind", c.kind), attribute.String("lifecycle.merge_queue.result", c.result)}
}

// newQueueInstruments builds the merge queue's instruments with b.
func newQueueInstruments(b *instrumentBuilder) queueInstruments {
	q := queueInstruments{
		outcomes: newAttrCache(oneAttr[string]("lifecycle.merge_queue.outcome")),
		results:  newAttrCache(candidateResultAttributes),
	}
	var err error
	q.timeInQueue, err = b.m.Float64Histogram("lifecycle.merge_queue.time_in_queue", metric.WithUnit("s"),
		metric.WithDescription("Time from a change's entry into a merge queue to its leaving it, by outcome: landed, reworked or removed."),
		metric.WithExplicitBucketBoundaries(60, 300, 600, 1200, 1800, 2400, 3600, 4800, 7200, 14400, 28800))
	b.keep(err)
	q.runs = b.counter("lifecycle.merge_queue.ci_runs", "{run}", "CI runs of merge queue candidates started, those later cancelled included; divided by lifecycle.merge_queue.time_in_queue's landed count, the CI runs per landed change.")
	q.batches = b.counter("lifecycle.merge_queue.batches", "{candidate}", "Merge queue candidates tested, by kind (chain, leaf, alternative, probe) and result (passed, failed): the chain's and leaves' pass rate is the batch pass rate.")
	q.bisection, err = b.m.Int64Histogram("lifecycle.merge_queue.bisection_depth", metric.WithUnit("{split}"),
		metric.WithDescription("How many failed batches led to a probe of a merge queue's failed batch, per probe tested."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 8, 10))
	b.keep(err)
	return q
}

// QueueLeft records the time a change spent in a merge queue before it
// left it with outcome (landed, reworked, removed).
func (t *Telemetry) QueueLeft(ctx context.Context, outcome string, took time.Duration) {
	t.queue.timeInQueue.Record(ctx, took.Seconds(), t.queue.outcomes.get(outcome).rec...)
}

// QueueRunStarted counts a CI run of a merge queue candidate, when it
// starts: one cancelled later (its candidate dropped) took CI time too.
func (t *Telemetry) QueueRunStarted(ctx context.Context) {
	t.queue.runs.Add(ctx, 1)
}

// QueueTested counts a merge queue candidate's CI run that finished: its
// kind (chain, leaf, alternative, probe), passed or not, and, for a probe
// of a failed batch, how deep the bisection is (0 for a candidate that
// is not a probe).
func (t *Telemetry) QueueTested(ctx context.Context, kind string, passed bool, bisection int) {
	result := "failed"
	if passed {
		result = "passed"
	}
	t.queue.results.add(ctx, t.queue.batches, candidateResult{kind, result}, 1)
	if bisection > 0 {
		t.queue.bisection.Record(ctx, int64(bisection))
	}
}

// QueueDepth is the number of entries of one merge queue.
type QueueDepth struct {
	Queue, Base string
	Entries     int64
}

// ObserveQueueDepth registers lifecycle.merge_queue.depth, read through
// depths at each collection, until Close. Its errors are the meter's.
func (t *Telemetry) ObserveQueueDepth(depths func(ctx context.Context) ([]QueueDepth, error)) error {
	g, err := t.meter.Int64ObservableGauge("lifecycle.merge_queue.depth", metric.WithUnit("{change}"),
		metric.WithDescription("Changes in each merge queue, waiting or under test, in every process sharing the Store."))
	if err != nil {
		return err
	}
	return t.observe(func(ctx context.Context, o metric.Observer) error {
		ds, err := depths(ctx)
		if err != nil {
			return err
		}
		for _, d := range ds {
			o.ObserveInt64(g, d.Entries, metric.WithAttributes(attribute.String("lifecycle.merge_queue.id", d.Queue), attribute.String("lifecycle.merge_queue.base", d.Base)))
		}
		return nil
	}, g)
}
