package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// RequestIDHeader carries a request's id in and out: a caller's own id is kept (and passed on
// to the hosts and Pub/Sub messages the request reaches), and every answer names the id its
// log lines carry.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a caller's id: it is copied onto every log line of its request.
const maxRequestIDLen = 128

type requestIDKey struct{}

// WithRequestID is ctx carrying id as its request's id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the id of ctx's request, "" outside one.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// validRequestID accepts the ids proxies and clients make (UUIDs, hex, base64url, dotted
// parts) and refuses anything that could forge a log field or grow a line without bound.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:/+=", c)) {
			return false
		}
	}
	return true
}

// newRequestID is 16 random bytes in hex, the shape of a trace id.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Middleware wraps a server's whole handler: it gives each request its id (the caller's valid
// X-Request-Id, else the trace id of its traceparent, else a new one) and answers it in
// RequestIDHeader; it takes the caller's trace context, and starts a server span for plain
// HTTP routes (webhooks, Pub/Sub pushes, OAuth callbacks) — Connect calls get theirs from
// Interceptor, with their method's name; and it turns a panic in a plain route into a logged
// stack and a 500, where net/http would only print it.
func Middleware(log *slog.Logger, h http.Handler) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if !trace.SpanContextFromContext(ctx).IsValid() {
			// A Connect call: no span yet, but its logs still want the caller's trace.
			ctx = Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = ""
			if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
				id = sc.TraceID().String()
			} else {
				id = newRequestID()
			}
		}
		w.Header().Set(RequestIDHeader, id)
		ctx = WithRequestID(ctx, id)
		defer recoverHTTP(ctx, log, w, r)
		r = r.WithContext(ctx)
		h.ServeHTTP(w, r)
		if r.Pattern != "" {
			// The route the mux matched ("POST /api/v1/webhooks/{id}") names the span better
			// than the path, whose ids would make every span's name its own.
			trace.SpanFromContext(ctx).SetName(r.Pattern)
		}
	})
	return otelhttp.NewHandler(inner, "http", otelhttp.WithPropagators(Propagator),
		otelhttp.WithFilter(func(r *http.Request) bool { return !connectCall(r) && !probe(r.URL.Path) }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
	)
}

// connectCall tells a Connect, gRPC or gRPC-Web call, which otelconnect traces.
func connectCall(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return r.Header.Get("Connect-Protocol-Version") != "" || strings.HasPrefix(ct, "application/grpc") ||
		strings.HasPrefix(ct, "application/connect+")
}

// probe tells the health checks' paths, which would fill traces with nothing.
func probe(path string) bool { return path == "/healthz" || path == "/readyz" }

func recoverHTTP(ctx context.Context, log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		// net/http's own way to cut a response short: not a failure.
		panic(p)
	}
	log.ErrorContext(ctx, "panic in HTTP handler", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
	trace.SpanFromContext(ctx).RecordError(errors.New("panic"))
	// A handler that already began its answer gets a broken one; the rest get a 500.
	http.Error(w, "internal error", http.StatusInternalServerError)
}

// Interceptor traces and measures every Connect call it wraps (a server's handlers, or a
// client's calls, which then carry the trace to the server), and has clients pass on the
// request id. Servers trust the caller's traceparent, so a trace begun by a caller (or by the
// API calling a host) goes on across the hop instead of starting anew.
func Interceptor() connect.Option {
	// The global providers: Setup's, or the no-op ones, which still pass a caller's trace on.
	// Bidirectional streams are left untraced: their handlers (the host's DialApp, shells) leave
	// a goroutine in Receive when they return, for net/http to end with the request, and
	// otelconnect's per-stream state is not safe for a Receive concurrent with the call's end
	// (the race detector caught it). Their unary and server-streaming neighbours are traced.
	notBidi := otelconnect.WithFilter(func(_ context.Context, spec connect.Spec) bool {
		return spec.StreamType != connect.StreamTypeBidi
	})
	otel, err := otelconnect.NewInterceptor(otelconnect.WithTrustRemote(), otelconnect.WithPropagator(Propagator), notBidi)
	if err != nil {
		// Only invalid options fail, and none are passed by callers: a bug here.
		panic(err)
	}
	return connect.WithInterceptors(otel, requestIDInterceptor{})
}

// requestIDInterceptor sends the request id of the call's context along with client calls.
type requestIDInterceptor struct{}

func (requestIDInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if id := RequestID(ctx); id != "" && req.Spec().IsClient {
			req.Header().Set(RequestIDHeader, id)
		}
		return next(ctx, req)
	}
}

func (requestIDInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if id := RequestID(ctx); id != "" {
			conn.RequestHeader().Set(RequestIDHeader, id)
		}
		return conn
	}
}

func (requestIDInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
