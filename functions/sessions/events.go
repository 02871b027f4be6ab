package sessions

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/paging"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// StreamEvents sends the session's events after `since`: the stored backlog, then each new
// event as it is written, with no gap and no duplicate between the two.
func (s *Service) StreamEvents(ctx context.Context, req *connect.Request[appv1.StreamEventsRequest], out *connect.ServerStream[appv1.SessionEvent]) error {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return err
	}
	durableOnly := req.Msg.GetDurableOnly()
	return queryErr(s.events.Follow(ctx, rec.ID, req.Msg.GetSince(), func(e eventlog.Event) error {
		if durableOnly && !e.Durable {
			return nil
		}
		return out.Send(toEvent(e))
	}))
}

// ListSessionEvents pages through the session's events forward (after_idx) or backward
// (before_idx alone), filtered by kinds and tool names.
func (s *Service) ListSessionEvents(ctx context.Context, req *connect.Request[appv1.ListSessionEventsRequest]) (*connect.Response[appv1.ListSessionEventsResponse], error) {
	m := req.Msg
	rec, err := s.load(ctx, m.GetSessionId())
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit("limit", m.GetLimit(), s.d.Limits.Events)
	if err != nil {
		return nil, err
	}
	events, next, err := s.events.List(ctx, rec.ID, eventlog.Query{
		AfterIdx: m.GetAfterIdx(), BeforeIdx: m.GetBeforeIdx(), Limit: limit,
		Kinds: m.GetKinds(), ToolNames: m.GetToolNames(),
	})
	if err != nil {
		return nil, queryErr(err)
	}
	out := &appv1.ListSessionEventsResponse{NextAfterIdx: next}
	for _, e := range events {
		out.Events = append(out.Events, toEvent(e))
	}
	return connect.NewResponse(out), nil
}

// GetLog returns the session's conversation: prompts, the agent's messages and tool use, the
// commands run and artifacts made — the first entries, or the last ones with tail.
func (s *Service) GetLog(ctx context.Context, req *connect.Request[appv1.GetLogRequest]) (*connect.Response[appv1.GetLogResponse], error) {
	m := req.Msg
	rec, err := s.load(ctx, m.GetSessionId())
	if err != nil {
		return nil, err
	}
	kinds := eventlog.ConversationKinds()
	if k := m.GetKind(); k != "" {
		if !eventlog.IsConversation(k) {
			return nil, apierr.InvalidArgument("kind", fmt.Sprintf("must be one of %s", strings.Join(kinds, ", ")))
		}
		kinds = []string{k}
	}
	limit, err := paging.Limit("limit", m.GetLimit(), s.d.Limits.Events)
	if err != nil {
		return nil, err
	}
	var events []eventlog.Event
	if m.GetTail() {
		events, _, err = s.events.List(ctx, rec.ID, eventlog.Query{BeforeIdx: tailFrom, Limit: limit, Kinds: kinds})
	} else {
		events, _, err = s.events.List(ctx, rec.ID, eventlog.Query{Limit: limit, Kinds: kinds})
	}
	if err != nil {
		return nil, queryErr(err)
	}
	out := &appv1.GetLogResponse{SessionId: shownID(ctx, rec), Kind: m.GetKind()}
	for _, e := range events {
		out.Events = append(out.Events, &appv1.ConversationEntry{Idx: e.Idx, Kind: e.Kind, At: clock.Format(e.At), PayloadJson: e.PayloadJSON})
	}
	return connect.NewResponse(out), nil
}

// tailFrom is a before_idx past any real idx, so a backward page starts at the log's end.
const tailFrom = 1<<63 - 1

func toEvent(e eventlog.Event) *appv1.SessionEvent {
	idx := e.Idx
	return &appv1.SessionEvent{Idx: &idx, Kind: e.Kind, PayloadJson: e.PayloadJSON}
}

// queryErr turns the event log's refusal of a query into invalid_argument naming the field.
func queryErr(err error) error {
	var qe *eventlog.QueryError
	if errors.As(err, &qe) {
		return apierr.InvalidArgument(qe.Field, qe.Reason)
	}
	return err
}

// SSE serves GET httpapi.EventsPath as text/event-stream: each event as `id: <idx>`, `event:
// <kind>` and `data: <payload_json>`. A reconnecting EventSource sends Last-Event-ID and gets what
// came after it. The key comes in the x-api-key header or, for EventSource clients that cannot set
// headers, the api_key query parameter; a signed-in dashboard's session cookie serves too.
func (s *Service) SSE(authn *auth.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since, err := lastEventID(r)
		if err != nil {
			writeErr(w, r, err)
			return
		}
		ctx, rec, ok := s.routeSession(authn, w, r, auth.Read)
		if !ok {
			return
		}
		flusher, ok := w.(http.Flusher)
		if !ok {
			writeErr(w, r, errors.New("streaming unsupported"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		flusher.Flush()
		_ = s.events.Follow(ctx, rec.ID, since, func(e eventlog.Event) error {
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Idx, e.Kind, e.PayloadJSON); err != nil {
				return err
			}
			flusher.Flush()
			return nil
		})
	})
}

// lastEventID reads where a client resumes: Last-Event-ID, else the `since` parameter, else 0.
func lastEventID(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	field := "Last-Event-ID"
	if v == "" {
		v, field = r.URL.Query().Get("since"), "since"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, apierr.InvalidArgument(field, "must be an event idx")
	}
	return n, nil
}

// errorWriter answers the plain HTTP route as Connect answers a unary call: the code's HTTP
// status and a JSON body, so that its errors read like the RPCs'.
var errorWriter = connect.NewErrorWriter()

// writeErr writes err as the RPCs would; an error that is not a Connect error says no more than
// "internal error".
func writeErr(w http.ResponseWriter, r *http.Request, err error) {
	if _, ok := errors.AsType[*connect.Error](err); !ok {
		err = connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
	_ = errorWriter.Write(w, r, err)
}
