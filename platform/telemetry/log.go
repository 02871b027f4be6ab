package telemetry

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Cloud Logging's names for the fields it reads out of a JSON log line.
const (
	FieldSeverity     = "severity"
	FieldMessage      = "message"
	FieldTrace        = "logging.googleapis.com/trace"
	FieldSpanID       = "logging.googleapis.com/spanId"
	FieldTraceSampled = "logging.googleapis.com/trace_sampled"
	// FieldRequestID is the request id (RequestIDHeader) of the request that logged the line.
	FieldRequestID = "request_id"
)

// NewLogger writes JSON lines to w that Cloud Logging reads as structured entries: severity
// and message under its names, and, on every line logged with a request's context, the
// request's id and its trace and span, so the entries of one request group under its trace.
// project, when known, qualifies the trace as Cloud Logging wants (projects/P/traces/T).
func NewLogger(w io.Writer, level slog.Leveler, project string) *slog.Logger {
	json := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: cloudNames})
	return slog.New(ContextHandler(json, project))
}

// ContextHandler is next with the request id, trace and span of each record's context added,
// for loggers other than NewLogger's (`hangar dev` writes text to a terminal).
func ContextHandler(next slog.Handler, project string) slog.Handler {
	return &contextHandler{next: next, project: project}
}

// cloudNames renames slog's level and msg keys and maps its levels onto Cloud Logging's
// severities (which say WARNING, not WARN).
func cloudNames(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.MessageKey:
		a.Key = FieldMessage
	case slog.LevelKey:
		a.Key = FieldSeverity
		level, _ := a.Value.Any().(slog.Level)
		switch {
		case level >= slog.LevelError:
			a.Value = slog.StringValue("ERROR")
		case level >= slog.LevelWarn:
			a.Value = slog.StringValue("WARNING")
		case level >= slog.LevelInfo:
			a.Value = slog.StringValue("INFO")
		default:
			a.Value = slog.StringValue("DEBUG")
		}
	}
	return a
}

// contextHandler adds what a record's context knows of its request.
type contextHandler struct {
	next    slog.Handler
	project string
}

func (h *contextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if id := RequestID(ctx); id != "" {
			r.AddAttrs(slog.String(FieldRequestID, id))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			t := sc.TraceID().String()
			if h.project != "" {
				t = "projects/" + h.project + "/traces/" + t
			}
			r.AddAttrs(slog.String(FieldTrace, t), slog.String(FieldSpanID, sc.SpanID().String()),
				slog.Bool(FieldTraceSampled, sc.IsSampled()))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &contextHandler{next: h.next.WithAttrs(as), project: h.project}
}

func (h *contextHandler) WithGroup(name string) slog.Handler {
	return &contextHandler{next: h.next.WithGroup(name), project: h.project}
}
