package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// lines decodes every JSON line of buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	spanID      = "00f067aa0ba902b7"
	traceparent = "00-" + traceID + "-" + spanID + "-01"
)

func remoteCtx(t *testing.T) context.Context {
	t.Helper()
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatal("test traceparent did not parse")
	}
	return ctx
}

func TestLoggerWritesCloudLoggingFieldsWithTheRequestsTraceAndID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ctx      func(*testing.T) context.Context
		log      func(*slog.Logger, context.Context)
		severity string
		want     map[string]any
		absent   []string
	}{
		{"info outside a request has no trace", func(*testing.T) context.Context { return context.Background() },
			func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "hello") }, "INFO",
			map[string]any{"message": "hello"}, []string{FieldTrace, FieldSpanID, FieldRequestID, "level", "msg"}},
		{"warn is WARNING", func(*testing.T) context.Context { return context.Background() },
			func(l *slog.Logger, ctx context.Context) { l.WarnContext(ctx, "careful") }, "WARNING",
			map[string]any{"message": "careful"}, nil},
		{"error in a traced request names trace, span and request", func(t *testing.T) context.Context {
			return WithRequestID(remoteCtx(t), "req-1")
		}, func(l *slog.Logger, ctx context.Context) { l.ErrorContext(ctx, "boom", "k", "v") }, "ERROR",
			map[string]any{"message": "boom", "k": "v", FieldTrace: "projects/proj/traces/" + traceID,
				FieldSpanID: spanID, FieldTraceSampled: true, FieldRequestID: "req-1"}, nil},
		{"a logger with attrs keeps adding the request's fields", func(*testing.T) context.Context {
			return WithRequestID(context.Background(), "req-2")
		}, func(l *slog.Logger, ctx context.Context) { l.With("svc", "x").DebugContext(ctx, "detail") }, "DEBUG",
			map[string]any{"svc": "x", FieldRequestID: "req-2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(NewLogger(&buf, slog.LevelDebug, "proj"), tc.ctx(t))
			got := lines(t, &buf)
			if len(got) != 1 {
				t.Fatalf("%d lines: %s", len(got), buf.String())
			}
			if got[0][FieldSeverity] != tc.severity {
				t.Errorf("severity %v, want %s", got[0][FieldSeverity], tc.severity)
			}
			for k, v := range tc.want {
				if got[0][k] != v {
					t.Errorf("%s = %v, want %v (line %s)", k, got[0][k], v, buf.String())
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[0][k]; ok {
					t.Errorf("%s present in %s", k, buf.String())
				}
			}
		})
	}
}

func TestMiddlewareGivesEveryRequestAnIDOnItsLinesAndItsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    func(string) bool
		why     string
	}{
		{"a caller's id is kept", map[string]string{RequestIDHeader: "abc-123"}, func(id string) bool { return id == "abc-123" }, "abc-123"},
		{"a traceparent gives its trace id", map[string]string{"traceparent": traceparent}, func(id string) bool { return id == traceID }, "the trace id"},
		{"a caller's id wins over its traceparent", map[string]string{RequestIDHeader: "mine", "traceparent": traceparent}, func(id string) bool { return id == "mine" }, "mine"},
		{"a forged id is replaced", map[string]string{RequestIDHeader: `x","severity":"ERROR`}, func(id string) bool { return len(id) == 32 }, "a new 32-hex id"},
		{"an overlong id is replaced", map[string]string{RequestIDHeader: strings.Repeat("a", maxRequestIDLen+1)}, func(id string) bool { return len(id) == 32 }, "a new 32-hex id"},
		{"no id gets a new one", nil, func(id string) bool { return len(id) == 32 }, "a new 32-hex id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := NewLogger(&buf, slog.LevelInfo, "")
			h := Middleware(log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				log.InfoContext(r.Context(), "handling")
			}))
			req := httptest.NewRequest(http.MethodPost, "/rpc/svc.app.v1.X/Y", nil)
			req.Header.Set("Connect-Protocol-Version", "1")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			id := rec.Header().Get(RequestIDHeader)
			if !tc.want(id) {
				t.Fatalf("answered request id %q, want %s", id, tc.why)
			}
			got := lines(t, &buf)
			if len(got) != 1 || got[0][FieldRequestID] != id {
				t.Fatalf("log lines %s lack request id %q", buf.String(), id)
			}
			if tc.headers["traceparent"] != "" && got[0][FieldTrace] != traceID {
				t.Fatalf("log line %s lacks the caller's trace", buf.String())
			}
		})
	}
}

func TestMiddlewareTurnsAPanicIntoALoggedStackAndA500(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo, "")
	h := Middleware(log, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("kaboom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhooks/x", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("answered %d, want 500", rec.Code)
	}
	got := lines(t, &buf)
	if len(got) != 1 || got[0][FieldSeverity] != "ERROR" || got[0]["panic"] != "kaboom" ||
		!strings.Contains(got[0]["stack"].(string), "TestMiddlewareTurnsAPanicIntoALoggedStackAndA500") ||
		got[0][FieldRequestID] != rec.Header().Get(RequestIDHeader) {
		t.Fatalf("log %s", buf.String())
	}
}

func TestReadyAnswers503NamingEveryFailingCheck(t *testing.T) {
	fail := func(context.Context) error { return errors.New("secret internal address 10.0.0.1") }
	pass := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name   string
		checks map[string]Check
		code   int
		body   string
	}{
		{"all pass", map[string]Check{"a": pass, "b": pass}, http.StatusOK, "ok\n"},
		{"none", nil, http.StatusOK, "ok\n"},
		{"some fail", map[string]Check{"a": pass, "pubsub": fail, "firestore": fail}, http.StatusServiceUnavailable, "firestore\npubsub\n"},
		{"a check past its deadline fails", map[string]Check{"slow": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}, http.StatusServiceUnavailable, "slow\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
			if tc.name == "a check past its deadline fails" {
				ctx, cancel := context.WithCancel(req.Context())
				cancel() // stands in for readyTimeout passing, without waiting for it
				req = req.WithContext(ctx)
			}
			Ready(NewLogger(&buf, slog.LevelInfo, ""), tc.checks).ServeHTTP(rec, req)
			if rec.Code != tc.code || rec.Body.String() != tc.body {
				t.Fatalf("answered %d %q, want %d %q", rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			if strings.Contains(rec.Body.String(), "10.0.0.1") {
				t.Fatal("a check's error reached the answer")
			}
		})
	}
}

// BenchmarkMiddlewareUntraced is what Middleware adds to each Connect call when nothing is
// exported (no provider installed): the request id, the traceparent read, the log context.
func BenchmarkMiddlewareUntraced(b *testing.B) {
	h := Middleware(slog.New(slog.DiscardHandler), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodPost, "/rpc/svc.app.v1.X/Y", nil)
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("traceparent", traceparent)
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
