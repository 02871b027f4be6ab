package telemetry_test

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

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// A handler that panics answers internal, and its stack is logged under the request's id,
// which the caller passed and the answer names; the server goes on serving.
func TestAPanickingConnectHandlerAnswersInternalAndLogsItsStackUnderTheRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, slog.LevelInfo, "")
	const procedure = "/test.v1.Test/Panic"
	h := connect.NewUnaryHandler(procedure, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		panic("handler bug")
	}, telemetry.Interceptor(), connect.WithInterceptors(apierr.Interceptor(log)))
	mux := http.NewServeMux()
	mux.Handle(procedure, h)
	srv := httptest.NewServer(telemetry.Middleware(log, mux))
	defer srv.Close()
	client := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+procedure, telemetry.Interceptor())
	for _, id := range []string{"first-call", "second-call"} {
		ctx := telemetry.WithRequestID(context.Background(), id)
		_, err := client.CallUnary(ctx, connect.NewRequest(&emptypb.Empty{}))
		if connect.CodeOf(err) != connect.CodeInternal || strings.Contains(err.Error(), "handler bug") {
			t.Fatalf("answered %v, want an opaque internal error", err)
		}
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Meta().Get(telemetry.RequestIDHeader) != id {
			t.Fatalf("answer's request id is not %q: %v", id, err)
		}
	}
	var found int
	for l := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["message"] == "panic in handler" && m["severity"] == "ERROR" && m["panic"] == "handler bug" &&
			strings.Contains(m["stack"].(string), "connect_test.go") && strings.HasSuffix(m[telemetry.FieldRequestID].(string), "-call") {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("found %d panic lines with stack and request id, want 2: %s", found, buf.String())
	}
}
