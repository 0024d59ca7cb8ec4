package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// defaultServiceName is the service.name of the demo's metrics and spans
// when OTEL_SERVICE_NAME is not set.
const defaultServiceName = "lifecycle-demo"

// telemetry is the demo's OpenTelemetry SDK: a MeterProvider read by a
// Prometheus exporter into a registry of its own, served at GET /metrics
// on the metrics' listener (-metrics-addr), and, when an OTLP endpoint is configured, a TracerProvider that exports
// spans over OTLP in batches.
type telemetry struct {
	meters  *sdkmetric.MeterProvider
	tracers *sdktrace.TracerProvider // nil: no OTLP endpoint, no spans
	// metrics serves the registry in Prometheus's text format.
	metrics http.Handler
}

// tracerProvider returns the TracerProvider to give the Service: the
// SDK's, or a no-op one when traces are not exported, so that no span is
// started at all.
func (t *telemetry) tracerProvider() trace.TracerProvider {
	if t.tracers == nil {
		return tracenoop.NewTracerProvider()
	}
	return t.tracers
}

// setupTelemetry sets up the demo's MeterProvider and, when
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set
// (getenv), its TracerProvider, over the protocol that
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL names
// ("http/protobuf", the default, or "grpc"). OTEL_SERVICE_NAME (default
// "lifecycle-demo") and OTEL_RESOURCE_ATTRIBUTES describe the process.
// The Service and the code-host adapters are given both providers; no
// global one is set. The exporters read the other OTEL_ variables themselves
// (headers, timeouts, certificates; the sampler and the batch processor's
// settings). Shut it down to flush the last spans.
func setupTelemetry(ctx context.Context, getenv func(string) string, log *slog.Logger) (*telemetry, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("opentelemetry resource: %w", err)
	}
	service, _ := res.Set().Value("service.name")

	// A registry of its own: the global one would be shared with whatever
	// else in the process registers there (and with a second demo in the
	// same test binary).
	reg := promclient.NewRegistry()
	// The Go runtime's metrics (go_*) too; not the process collector's,
	// which reads several /proc files per scrape (network statistics
	// among them) and was half the cost of a scrape.
	reg.MustRegister(collectors.NewGoCollector())
	// Without the otel_scope_* labels, which every series would repeat
	// (three of them, two empty): the Service's and the adapters'
	// instruments have names and attributes of their own, and a scrape
	// of 100 kB is 40 % smaller and quicker for it.
	exporter, err := prometheus.New(prometheus.WithRegisterer(reg), prometheus.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t := &telemetry{
		meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res)),
		metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorLog:            slogPrinter{log},
			ErrorHandling:       promhttp.ContinueOnError, // a failed collector costs its own series only
			MaxRequestsInFlight: 4,
			// Not gzipped: compressing 100 kB took as long as collecting
			// it, and a scrape is 100 kB every 15 s or so.
			DisableCompression: true,
		}),
	}
	log.Info("metrics: Prometheus text format at GET /metrics on -metrics-addr", "service.name", service.AsString())

	endpoint, protocol := otlpTraceSettings(getenv)
	if endpoint == "" {
		log.Info("traces: off (set OTEL_EXPORTER_OTLP_ENDPOINT to export them over OTLP)")
		return t, nil
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		err = fmt.Errorf("OTLP protocol %q is not supported: use http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("OTLP trace exporter: %w", err), t.meters.Shutdown(ctx))
	}
	t.tracers = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", "err", err) // an export that failed, for one
	}))
	log.Info("traces: exported over OTLP", "endpoint", endpoint, "protocol", protocol, "service.name", service.AsString())
	return t, nil
}

// otlpTraceSettings returns the OTLP endpoint traces go to ("" when none
// is set) and the protocol, as the OpenTelemetry specification's
// variables say: the traces' own variable wins over the general one, and
// the protocol defaults to http/protobuf.
func otlpTraceSettings(getenv func(string) string) (endpoint, protocol string) {
	first := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	endpoint = first("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	protocol = first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if protocol == "" {
		protocol = "http/protobuf"
	}
	return endpoint, protocol
}

// shutdown flushes the spans not yet exported and stops both providers.
func (t *telemetry) shutdown(ctx context.Context) error {
	var errs []error
	if t.tracers != nil {
		errs = append(errs, t.tracers.Shutdown(ctx))
	}
	errs = append(errs, t.meters.Shutdown(ctx))
	return errors.Join(errs...)
}

// slogPrinter logs promhttp's errors through slog.
type slogPrinter struct{ log *slog.Logger }

// Println logs v as a warning.
func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprint(v...)) }
