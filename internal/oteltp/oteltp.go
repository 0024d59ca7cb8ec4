// Package oteltp tells whether spans made through an OpenTelemetry
// TracerProvider record anything, so that instrumented code can skip
// making them, allocating nothing, when they would not; and reads the
// W3C Trace Context traceparent header (https://www.w3.org/TR/trace-context/),
// from which the lifecycle takes the trace ID its events carry.
package oteltp

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Mode is how spans of a TracerProvider given to a constructor are made.
type Mode uint8

const (
	// Off: the provider is the API's no-op one.
	Off Mode = iota
	// On: the provider was set explicitly.
	On
	// Global: the provider is the global one (or none was given), whose
	// spans record only once otel.SetTracerProvider has set a provider
	// that is not the no-op one.
	Global
)

// ModeOf returns the Mode of tp; nil is the global provider.
func ModeOf(tp trace.TracerProvider) Mode {
	switch {
	case tp == nil || IsGlobal(tp):
		return Global
	case IsNoop(tp):
		return Off
	}
	return On
}

// Active reports whether spans made now record anything.
func (m Mode) Active() bool {
	switch m {
	case On:
		return true
	case Global:
		tp := otel.GetTracerProvider()
		return !IsGlobal(tp) && !IsNoop(tp)
	}
	return false
}

// IsNoop reports whether tp is the API's no-op TracerProvider.
func IsNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return true
	}
	return false
}

// unset is what otel.GetTracerProvider returns until
// otel.SetTracerProvider is first called: the global, delegating
// provider, whose spans record nothing until a provider is set (after
// which otel.GetTracerProvider returns the provider set). It is read when
// this package initialises, before any code of a program that uses it
// can have set a provider: a program's main, and the init functions of
// the packages that import this one, run after it. Only this package's
// own dependencies (OpenTelemetry's) run before, and they set none.
var unset = otel.GetTracerProvider()

// IsGlobal reports whether tp is the global, delegating TracerProvider
// that stands in until otel.SetTracerProvider is first called.
func IsGlobal(tp trace.TracerProvider) bool { return tp != nil && tp == unset }
