package lifecycle_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// benchReceiver is a TLS receiver on loopback that counts deliveries and
// notes when each arrived, with its event's occurredAt (stamped just before
// the commit) and task.
type benchReceiver struct {
	srv       *httptest.Server
	delivered atomic.Int64
	conns     atomic.Int64 // connections accepted
	hang      bool         // hold every request until the client gives up

	mu       sync.Mutex
	arrivals []arrival
}

// arrival is a delivery as the receiver saw it.
type arrival struct {
	at, occurredAt time.Time
	taskID         string
}

func newBenchReceiver(b *testing.B, hang bool) *benchReceiver {
	rc := &benchReceiver{hang: hang}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes cut short at the end
	rc.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.srv.StartTLS()
	b.Cleanup(rc.srv.Close)
	return rc
}

var (
	occurredAtKey = []byte(`"occurredAt":"`)
	taskIDKey     = []byte(`"taskId":"`)
)

// member returns the string member of a JSON body that follows key.
func member(body, key []byte) string {
	i := bytes.Index(body, key)
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

func (rc *benchReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if rc.hang {
		<-r.Context().Done()
		return
	}
	a := arrival{at: time.Now(), taskID: member(body, taskIDKey)}
	a.occurredAt, _ = time.Parse(time.RFC3339Nano, member(body, occurredAtKey))
	rc.mu.Lock()
	rc.arrivals = append(rc.arrivals, a)
	rc.mu.Unlock()
	rc.delivered.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// benchOTel is the OpenTelemetry a webhook benchmark runs with: set
// returns the Config mutation that gives it to the Service.
type benchOTel struct {
	name string
	set  func(b *testing.B) func(*lifecycle.Config)
}

// benchOTels are run side by side: OpenTelemetry's no-op providers, and
// the SDK's, every span sampled and batched to an exporter that drops
// them, the metrics collected every second by a reader whose exporter
// drops them too, as a host that exports would.
var benchOTels = []benchOTel{
	{"otel=noop", func(*testing.B) func(*lifecycle.Config) {
		return func(c *lifecycle.Config) {
			c.MeterProvider, c.TracerProvider = metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()
		}
	}},
	{"otel=sdk", func(b *testing.B) func(*lifecycle.Config) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(discardMetrics{}, sdkmetric.WithInterval(time.Second))))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter())))
		b.Cleanup(func() {
			mp.Shutdown(context.Background())
			tp.Shutdown(context.Background())
		})
		return func(c *lifecycle.Config) { c.MeterProvider, c.TracerProvider = mp, tp }
	}},
}

// discardMetrics is a metric exporter that drops what it is given.
type discardMetrics struct{}

func (discardMetrics) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (discardMetrics) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (discardMetrics) Export(context.Context, *metricdata.ResourceMetrics) error { return nil }
func (discardMetrics) ForceFlush(context.Context) error                          { return nil }
func (discardMetrics) Shutdown(context.Context) error                            { return nil }

// webhookBench is a started Service on SQLite delivering to receivers.
type webhookBench struct {
	e         *benchEnv
	receivers []*benchReceiver
	committed sync.Map // task ID -> time.Time when CreateTask returned
	produced  int      // tasks created so far
}

// warmUp delivers a second of events at perSecond to every subscription,
// so that connections are open and pools warm, then forgets them.
func (wb *webhookBench) warmUp(b *testing.B, perSecond, subs int) {
	wb.produce(b, perSecond, perSecond)
	wb.wait(b, int64(perSecond*subs))
	for _, rc := range wb.receivers {
		rc.mu.Lock()
		rc.arrivals = rc.arrivals[:0]
		rc.mu.Unlock()
		rc.delivered.Store(0)
		rc.conns.Store(0)
	}
}

// newWebhookBench makes a Service with subs subscriptions to each healthy
// receiver and one to each hanging receiver; start starts it.
func newWebhookBench(b *testing.B, healthy, hanging, subs int, otel benchOTel) *webhookBench {
	b.Helper()
	wb := &webhookBench{}
	pool := x509.NewCertPool()
	for i := range healthy + hanging {
		rc := newBenchReceiver(b, i >= healthy)
		pool.AddCert(rc.srv.Certificate())
		wb.receivers = append(wb.receivers, rc)
	}
	wb.e = newBenchEnv(b, func(c *lifecycle.Config) {
		c.AllowPrivateWebhookTargets = true
		c.WebhookTLSConfig = &tls.Config{RootCAs: pool}
	}, otel.set(b))
	for i, rc := range wb.receivers {
		n := subs
		if i >= healthy {
			n = 1
		}
		for j := range n {
			_, err := wb.e.svc.CreateSubscription(b.Context(), lifecycle.CreateSubscriptionParams{
				URL:        rc.srv.URL + fmt.Sprintf("/hooks/%d", j),
				EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated},
				Secret:     "bench-secret-0123456789",
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	return wb
}

// start starts the Service, and closes it when the benchmark ends.
func (wb *webhookBench) start(b *testing.B) {
	if err := wb.e.svc.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		wb.e.svc.Close(ctx)
	})
}

// produce creates n tasks, each emitting one task.updated event, from 8
// goroutines; perSecond > 0 paces them to that rate overall.
func (wb *webhookBench) produce(b *testing.B, n, perSecond int) {
	wb.produced += n
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if perSecond > 0 {
					// Pacing the producers to a rate is what this benchmark measures under.
					time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(perSecond))))
				}
				t, err := wb.e.svc.CreateTask(context.Background(), lifecycle.CreateTaskParams{
					Identifier: fmt.Sprintf("HOOK-%d-%d", wb.produced, i),
					Title:      "Fix the login redirect",
					Links:      lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/HOOK-%d-%d", wb.produced, i)},
				})
				if err != nil {
					b.Error(err)
					return
				}
				wb.committed.Store(t.ID, time.Now())
			}
		}()
	}
	wg.Wait()
}

// wait waits until the healthy receivers have want deliveries in all.
func (wb *webhookBench) wait(b *testing.B, want int64) {
	if !testenv.WaitUntil(2*time.Minute, func() bool { return wb.delivered() >= want }) {
		b.Fatalf("%d of %d deliveries within 2 minutes", wb.delivered(), want)
	}
}

func (wb *webhookBench) delivered() int64 {
	var n int64
	for _, rc := range wb.receivers {
		n += rc.delivered.Load()
	}
	return n
}

// report reports deliveries per second over elapsed, and the latency
// percentiles of the healthy receivers' deliveries: from the event's
// occurredAt, stamped in the transaction before its commit (so counting
// the commit and its fsync), and from the return of the commit.
func (wb *webhookBench) report(b *testing.B, elapsed time.Duration) {
	var fromStamp, fromCommit []time.Duration
	for _, rc := range wb.receivers {
		rc.mu.Lock()
		for _, a := range rc.arrivals {
			fromStamp = append(fromStamp, a.at.Sub(a.occurredAt))
			if c, ok := wb.committed.Load(a.taskID); ok {
				fromCommit = append(fromCommit, max(0, a.at.Sub(c.(time.Time))))
			}
		}
		rc.mu.Unlock()
	}
	b.ReportMetric(float64(wb.delivered())/elapsed.Seconds(), "deliveries/s")
	var conns int64
	for _, rc := range wb.receivers {
		conns += rc.conns.Load()
	}
	b.ReportMetric(float64(conns), "new-conns")
	pct := func(d []time.Duration, p int) float64 {
		slices.Sort(d)
		return float64(d[len(d)*p/100].Microseconds()) / 1000
	}
	if len(fromStamp) > 0 {
		b.ReportMetric(pct(fromStamp, 50), "p50-ms")
		b.ReportMetric(pct(fromStamp, 99), "p99-ms")
	}
	if len(fromCommit) > 0 {
		b.ReportMetric(pct(fromCommit, 99), "p99-after-commit-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWebhookThroughput measures how fast the dispatcher delivers: b.N
// events are committed while it is stopped, then it is started and drains
// them, each to every subscription. (Its latency figures count the wait
// in the backlog.) Targets: 2,000 deliveries/s to one receiver, 5,000/s
// over 50 subscriptions.
func BenchmarkWebhookThroughput(b *testing.B) {
	for _, subs := range []int{1, 50} {
		for _, otel := range benchOTels {
			b.Run(fmt.Sprintf("subs=%d/%s", subs, otel.name), func(b *testing.B) {
				wb := newWebhookBench(b, 1, 0, subs, otel)
				wb.produce(b, b.N, 0)
				b.ResetTimer()
				start := time.Now()
				wb.start(b)
				wb.wait(b, int64(b.N*subs))
				wb.report(b, time.Since(start))
			})
		}
	}
}

// BenchmarkWebhookLatency commits events at a steady rate and reports
// commit-to-delivery latency. Target: p99 under 100 ms.
func BenchmarkWebhookLatency(b *testing.B) {
	for _, c := range []struct{ subs, rate int }{{1, 1000}, {50, 100}} {
		for _, otel := range benchOTels {
			b.Run(fmt.Sprintf("subs=%d/events-per-s=%d/%s", c.subs, c.rate, otel.name), func(b *testing.B) {
				wb := newWebhookBench(b, 1, 0, c.subs, otel)
				wb.start(b)
				wb.warmUp(b, c.rate, c.subs)
				start := time.Now()
				b.ResetTimer()
				wb.produce(b, b.N, c.rate)
				wb.wait(b, int64(b.N*c.subs))
				wb.report(b, time.Since(start))
			})
		}
	}
}

// BenchmarkWebhookHangingReceiver is BenchmarkWebhookLatency for 10
// subscriptions beside one whose receiver never answers: their latency
// must stay as it is without it.
func BenchmarkWebhookHangingReceiver(b *testing.B) {
	for _, hanging := range []int{0, 1} {
		for _, otel := range benchOTels {
			b.Run(fmt.Sprintf("hanging=%d/%s", hanging, otel.name), func(b *testing.B) {
				wb := newWebhookBench(b, 1, hanging, 10, otel)
				wb.start(b)
				wb.warmUp(b, 200, 10)
				start := time.Now()
				b.ResetTimer()
				wb.produce(b, b.N, 200)
				wb.wait(b, int64(b.N*10))
				wb.report(b, time.Since(start))
			})
		}
	}
}
