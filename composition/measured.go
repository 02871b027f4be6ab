package composition

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// measured records the latency histograms of the calls people wait on (telemetry.CreateDone,
// telemetry.ExecDone), outside apierr's interceptor so the code recorded is the one sent.
type measured struct{}

// latencies are the procedures measured, by the recorder of each.
var latencies = map[string]func(context.Context, time.Duration, string){
	appv1connect.SessionServiceCreateSessionProcedure: telemetry.CreateDone,
	appv1connect.SessionServiceExecProcedure:          telemetry.ExecDone,
}

// code is err's Connect code as a metric attribute, "ok" for none.
func code(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}

func (measured) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		record, ok := latencies[req.Spec().Procedure]
		if !ok {
			return next(ctx, req)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		record(ctx, time.Since(start), code(err))
		return resp, err
	}
}

func (measured) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (measured) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		record, ok := latencies[conn.Spec().Procedure]
		if !ok {
			return next(ctx, conn)
		}
		start := time.Now()
		err := next(ctx, conn)
		record(ctx, time.Since(start), code(err))
		return err
	}
}
