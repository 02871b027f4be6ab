package pubsub

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/hangar-dev/hangar/platform/telemetry"
)

// tracer makes the publish and process spans, over the global provider (telemetry.Setup's).
var tracer = otel.Tracer("github.com/hangar-dev/hangar/platform/pubsub")

// attrRequestID carries the publishing request's id to the handler's logs.
const attrRequestID = "hangar_request_id"

// carry is attrs with ctx's trace context (W3C traceparent, tracestate) and request id added,
// so the handler of the message continues the publisher's trace: a webhook delivery, the run
// it starts and the sessions that run makes are one trace. attrs itself is left alone.
func carry(ctx context.Context, attrs map[string]string) map[string]string {
	out := maps.Clone(attrs)
	if out == nil {
		out = map[string]string{}
	}
	telemetry.Propagator.Inject(ctx, propagation.MapCarrier(out))
	if id := telemetry.RequestID(ctx); id != "" {
		out[attrRequestID] = id
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// carried is ctx continuing the trace and request id that carry put in attrs.
func carried(ctx context.Context, attrs map[string]string) context.Context {
	ctx = telemetry.Propagator.Extract(ctx, propagation.MapCarrier(attrs))
	if id := attrs[attrRequestID]; id != "" {
		ctx = telemetry.WithRequestID(ctx, id)
	}
	return ctx
}
