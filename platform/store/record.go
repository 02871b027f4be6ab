package store

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync/atomic"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// recorder is what RecordQueries set, if anything.
var recorder atomic.Pointer[func(*firestorepb.StructuredQuery)]

// RecordQueries makes every client Open returns from now on report each query it runs (plain
// and aggregation) to record, as sent. Tests use it to check that production has the composite
// indexes those queries need, which the emulator never asks for. Production never calls it,
// and a client opened without it carries no hook.
func RecordQueries(record func(*firestorepb.StructuredQuery)) {
	recorder.Store(&record)
}

// recordingOption is the client option that reports queries to the recorder, or nil.
func recordingOption() (option.ClientOption, error) {
	rec := recorder.Load()
	if rec == nil {
		return nil, nil
	}
	intercept := grpc.WithChainStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return recordingStream{ClientStream: cs, record: *rec}, nil
		})
	addr := os.Getenv("FIRESTORE_EMULATOR_HOST")
	if addr == "" {
		return option.WithGRPCDialOption(intercept), nil
	}
	// The client dials the emulator itself, ignoring dial options: dial it the same way, with
	// the recorder, and hand it the connection, which it then uses instead.
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(emulatorOwner{}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
		intercept,
	)
	if err != nil {
		return nil, fmt.Errorf("dial the firestore emulator at %s: %w", addr, err)
	}
	return option.WithGRPCConn(conn), nil
}

// emulatorOwner is the credential the Firestore client sends the emulator: its owner, to whom
// security rules do not apply.
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (emulatorOwner) RequireTransportSecurity() bool { return false }

// recordingStream reports the queries sent on a stream (RunQuery and RunAggregationQuery are
// server-streaming calls).
type recordingStream struct {
	grpc.ClientStream
	record func(*firestorepb.StructuredQuery)
}

func (s recordingStream) SendMsg(m any) error {
	switch req := m.(type) {
	case *firestorepb.RunQueryRequest:
		s.record(req.GetStructuredQuery())
	case *firestorepb.RunAggregationQueryRequest:
		s.record(req.GetStructuredAggregationQuery().GetStructuredQuery())
	}
	return s.ClientStream.SendMsg(m)
}
