package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The instruments are made once from the global meter provider, which hands them on to the one
// Setup installs whenever that happens; before it (and without it) they record nothing.
var (
	meter = otel.Meter("github.com/hangar-dev/hangar")

	sessions = must(meter.Int64UpDownCounter("hangar.sessions",
		metric.WithDescription("Sessions by state: each process adds its creates and moves; a backend summing every process has the change since they started"),
		metric.WithUnit("{session}")))
	createDuration = must(meter.Float64Histogram("hangar.session.create.duration",
		metric.WithDescription("How long CreateSession took, to the session running or failing"),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(latencyBuckets...)))
	execDuration = must(meter.Float64Histogram("hangar.session.exec.duration",
		metric.WithDescription("How long an Exec ran, from the call to the command's exit"),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(latencyBuckets...)))
	webhookDeliveries = must(meter.Int64Counter("hangar.webhook.deliveries",
		metric.WithDescription("Webhook deliveries by outcome: accepted (published for automations) or dropped (and why)"),
		metric.WithUnit("{delivery}")))
	runOutcomes = must(meter.Int64Counter("hangar.automation.runs",
		metric.WithDescription("Automation runs by the outcome they ended with"),
		metric.WithUnit("{run}")))
	proxyConnections = must(meter.Int64Counter("hangar.egress.connections",
		metric.WithDescription("Sandbox egress proxy connections, allowed or denied"),
		metric.WithUnit("{connection}")))
)

// latencyBuckets cover a warm exec (milliseconds) to a cold create that pulls an image (a
// minute and more).
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func must[T any](v T, err error) T {
	if err != nil {
		// The SDK fails an instrument only for an invalid name or unit, both fixed here.
		panic(err)
	}
	return v
}

// SessionCreated counts a new session in its first state.
func SessionCreated(ctx context.Context, state string) {
	sessions.Add(ctx, 1, metric.WithAttributes(attribute.String("state", state)))
}

// SessionMoved moves a session's count from one state to another.
func SessionMoved(ctx context.Context, from, to string) {
	if from == to {
		return
	}
	sessions.Add(ctx, -1, metric.WithAttributes(attribute.String("state", from)))
	sessions.Add(ctx, 1, metric.WithAttributes(attribute.String("state", to)))
}

// CreateDone records a CreateSession that took d; code is its Connect code ("ok" on success).
func CreateDone(ctx context.Context, d time.Duration, code string) {
	createDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("code", code)))
}

// ExecDone records an Exec that took d; code as CreateDone's.
func ExecDone(ctx context.Context, d time.Duration, code string) {
	execDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("code", code)))
}

// WebhookDelivery counts a delivery with its outcome ("accepted", or why it was dropped).
func WebhookDelivery(ctx context.Context, outcome string) {
	webhookDeliveries.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// RunEnded counts an automation run that ended with outcome.
func RunEnded(ctx context.Context, outcome string) {
	runOutcomes.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// ProxyConnection counts an egress proxy connection, allowed or denied.
func ProxyConnection(ctx context.Context, allowed bool) {
	verdict := "denied"
	if allowed {
		verdict = "allowed"
	}
	proxyConnections.Add(ctx, 1, metric.WithAttributes(attribute.String("verdict", verdict)))
}
