package sessions

import (
	"context"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
)

// SendPrompt queues a prompt on an agent session, waking it when it is evicted; the host runs
// the queue, one prompt at a time, through the session's harness.
func (s *Service) SendPrompt(ctx context.Context, req *connect.Request[appv1.SendPromptRequest]) (*connect.Response[appv1.SendPromptResponse], error) {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	client, err := s.host(ctx, rec, true)
	if err != nil {
		return nil, err
	}
	return client.SendPrompt(ctx, connect.NewRequest(req.Msg))
}

// EditQueuedPrompt changes a prompt that has not started.
func (s *Service) EditQueuedPrompt(ctx context.Context, req *connect.Request[appv1.EditQueuedPromptRequest]) (*connect.Response[appv1.EditQueuedPromptResponse], error) {
	client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return client.EditQueuedPrompt(ctx, connect.NewRequest(req.Msg))
}

// DequeueQueuedPrompt drops a prompt that has not started.
func (s *Service) DequeueQueuedPrompt(ctx context.Context, req *connect.Request[appv1.DequeueQueuedPromptRequest]) (*connect.Response[appv1.DequeueQueuedPromptResponse], error) {
	client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return client.DequeueQueuedPrompt(ctx, connect.NewRequest(req.Msg))
}

// Interrupt stops the running turn.
func (s *Service) Interrupt(ctx context.Context, req *connect.Request[appv1.InterruptRequest]) (*connect.Response[appv1.InterruptResponse], error) {
	client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return client.Interrupt(ctx, connect.NewRequest(req.Msg))
}

// CompleteToolCall hands a client's tool result to the harness of the session's running turn,
// which waits on tool_call_id; the host checks the result and the call.
func (s *Service) CompleteToolCall(ctx context.Context, req *connect.Request[appv1.CompleteToolCallRequest]) (*connect.Response[appv1.CompleteToolCallResponse], error) {
	if req.Msg.GetToolCallId() == "" {
		return nil, apierr.InvalidArgument("tool_call_id", "is required")
	}
	client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return client.CompleteToolCall(ctx, connect.NewRequest(req.Msg))
}
