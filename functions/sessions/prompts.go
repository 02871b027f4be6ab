package sessions

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/sessiondb"
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
	resp, err := client.SendPrompt(ctx, toHost(req.Msg, rec))
	return fromHost(ctx, rec, resp, err)
}

// EditQueuedPrompt changes a prompt that has not started.
func (s *Service) EditQueuedPrompt(ctx context.Context, req *connect.Request[appv1.EditQueuedPromptRequest]) (*connect.Response[appv1.EditQueuedPromptResponse], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp, err := client.EditQueuedPrompt(ctx, toHost(req.Msg, rec))
	return fromHost(ctx, rec, resp, err)
}

// DequeueQueuedPrompt drops a prompt that has not started.
func (s *Service) DequeueQueuedPrompt(ctx context.Context, req *connect.Request[appv1.DequeueQueuedPromptRequest]) (*connect.Response[appv1.DequeueQueuedPromptResponse], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp, err := client.DequeueQueuedPrompt(ctx, toHost(req.Msg, rec))
	return fromHost(ctx, rec, resp, err)
}

// Interrupt stops the running turn.
func (s *Service) Interrupt(ctx context.Context, req *connect.Request[appv1.InterruptRequest]) (*connect.Response[appv1.InterruptResponse], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp, err := client.Interrupt(ctx, toHost(req.Msg, rec))
	return fromHost(ctx, rec, resp, err)
}

// CompleteToolCall hands a client's tool result to the harness of the session's running turn,
// which waits on tool_call_id; the host checks the result and the call.
func (s *Service) CompleteToolCall(ctx context.Context, req *connect.Request[appv1.CompleteToolCallRequest]) (*connect.Response[appv1.CompleteToolCallResponse], error) {
	if req.Msg.GetToolCallId() == "" {
		return nil, apierr.InvalidArgument("tool_call_id", "is required")
	}
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp, err := client.CompleteToolCall(ctx, toHost(req.Msg, rec))
	return fromHost(ctx, rec, resp, err)
}

// PromptDone reports whether the turn of a prompt of a session the caller may see has ended,
// and its status, for another service (an automation's prompt block waits on its turn); a
// missing prompt is apierr NotFound.
func (s *Service) PromptDone(ctx context.Context, sessionID, promptID string) (done bool, status string, err error) {
	p, err := s.prompt(ctx, sessionID, promptID)
	if err != nil {
		return false, "", err
	}
	switch p.Status {
	case sessiondb.PromptQueued, sessiondb.PromptRunning:
		return false, string(p.Status), nil
	}
	return true, string(p.Status), nil
}

// prompt reads one prompt of a session the caller may see; a missing prompt is apierr NotFound.
func (s *Service) prompt(ctx context.Context, sessionID, promptID string) (*sessiondb.Prompt, error) {
	if err := ids.Check("prompt_id", promptID); err != nil {
		return nil, err
	}
	rec, err := s.load(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	p, err := s.store.Prompt(ctx, rec.ID, promptID)
	if errors.Is(err, sessiondb.ErrNotFound) {
		return nil, apierr.NotFound("prompt", promptID)
	}
	return p, err
}
