package oteltp

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// uncomparable is a TracerProvider whose dynamic type cannot be compared.
type uncomparable struct {
	tracenoop.TracerProvider
	tags []string
}

// TestIsGlobal: the provider that stands in before one is set is the
// global one, and nothing else is, whatever its type. It runs before
// TestModes, which sets the global provider.
func TestIsGlobal(t *testing.T) {
	if !IsGlobal(otel.GetTracerProvider()) {
		t.Fatal("the unset global provider is not global (is it set in this test binary?)")
	}
	sdk := sdktrace.NewTracerProvider()
	defer sdk.Shutdown(t.Context())
	for name, tp := range map[string]trace.TracerProvider{
		"nil": nil, "noop": tracenoop.NewTracerProvider(), "sdk": sdk, "uncomparable": uncomparable{tags: []string{"a"}},
	} {
		if IsGlobal(tp) {
			t.Errorf("%s: global", name)
		}
	}
}

// TestModes: the no-op providers are off, an SDK provider is on, and the
// global one follows what is set (not parallel: it sets the global
// provider).
func TestModes(t *testing.T) {
	sdk := sdktrace.NewTracerProvider()
	defer sdk.Shutdown(t.Context())
	if m := ModeOf(tracenoop.NewTracerProvider()); m != Off || m.Active() {
		t.Errorf("no-op: %v, active %v", m, m.Active())
	}
	if m := ModeOf(&tracenoop.TracerProvider{}); m != Off {
		t.Errorf("no-op pointer: %v", m)
	}
	if m := ModeOf(sdk); m != On || !m.Active() {
		t.Errorf("SDK: %v, active %v", m, m.Active())
	}
	global := ModeOf(otel.GetTracerProvider())
	if global != Global || global.Active() || ModeOf(nil) != Global {
		t.Fatalf("unset global: %v, active %v", global, global.Active())
	}
	otel.SetTracerProvider(sdk)
	if !global.Active() {
		t.Error("global set to the SDK: not active")
	}
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	if global.Active() {
		t.Error("global set to no-op: active")
	}
}
