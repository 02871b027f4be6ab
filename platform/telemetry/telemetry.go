// Package telemetry is Hangar's observability: structured logs in Cloud Logging's JSON shape
// with the trace and request id of the request that wrote them, OpenTelemetry traces (the
// Connect APIs through otelconnect, plain HTTP routes, Pub/Sub messages carrying their trace in
// attributes, and whatever the Google client libraries emit), OpenTelemetry metrics, a request
// id middleware that also recovers panics, and the /readyz handler. docs/observability.md says
// what is exported where.
//
// Setup installs the process's providers globally, because the Firestore and Pub/Sub client
// libraries and otelconnect read the global ones; everything else here works with or without it.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// EndpointEnv turns on OTLP export (traces and metrics over HTTP) when set; the exporters read
// the rest of the standard OTEL_EXPORTER_OTLP_* variables themselves.
const EndpointEnv = "OTEL_EXPORTER_OTLP_ENDPOINT"

// Propagator carries trace context between processes, in HTTP headers and Pub/Sub attributes:
// W3C traceparent and tracestate, and baggage. Hangar's own hops use it whether or not Setup
// ran, so a caller's trace reaches the logs of a process that exports nothing.
var Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Options say what Setup exports.
type Options struct {
	// Service names the process in its resource (service.name): "hangar-api", "hangar-host".
	Service string
	// SpanExporter, when set, takes the spans instead of OTLP: tests pass tracetest's
	// in-memory exporter, synchronously so a span is there as soon as it ends.
	SpanExporter sdktrace.SpanExporter
	// MetricReader, when set, reads the metrics instead of OTLP (tests: a manual reader).
	MetricReader sdkmetric.Reader
	// Sampler overrides the sampler (default: the OTEL_TRACES_SAMPLER variables, else parent
	// based, always on at the root).
	Sampler sdktrace.Sampler
}

// Setup installs the W3C trace context propagator always (so an incoming traceparent reaches
// the logs and the host even when nothing is exported), and a tracer and meter provider when
// something takes their output: o's exporter or reader, or OTLP when EndpointEnv is set. With
// neither, as under `hangar dev` by default, spans are not recorded at all. The returned
// function flushes and stops what Setup started.
func Setup(ctx context.Context, o Options) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(Propagator)
	spans, reader := o.SpanExporter, o.MetricReader
	otlp := os.Getenv(EndpointEnv) != ""
	if spans == nil && otlp {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
		}
		spans = exp
	}
	if reader == nil && otlp {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP metric exporter: %w", err)
		}
		reader = sdkmetric.NewPeriodicReader(exp)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(o.Service)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	var stops []func(context.Context) error
	if spans != nil {
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		if o.SpanExporter != nil {
			opts = append(opts, sdktrace.WithSyncer(spans))
		} else {
			opts = append(opts, sdktrace.WithBatcher(spans))
		}
		if o.Sampler != nil {
			opts = append(opts, sdktrace.WithSampler(o.Sampler))
		}
		tp := sdktrace.NewTracerProvider(opts...)
		otel.SetTracerProvider(tp)
		stops = append(stops, tp.Shutdown)
	}
	if reader != nil {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader))
		otel.SetMeterProvider(mp)
		stops = append(stops, mp.Shutdown)
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop(ctx))
		}
		return errors.Join(errs...)
	}, nil
}
