package sessions

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// answerMessages is how many of an agent's last messages make its answer.
const answerMessages = 1000

// AgentAnswer is what the agent of a session the caller may see has said: the text of its last
// messages (up to answerMessages), oldest first, a line each. It is what an in-process caller
// that waited for the agent's turn to end (a review pass) reads as the agent's output.
func (s *Service) AgentAnswer(ctx context.Context, sessionID string) (string, error) {
	kind, limit, tail := eventlog.KindAssistantMessage, int64(answerMessages), true
	log, err := s.GetLog(ctx, connect.NewRequest(&appv1.GetLogRequest{SessionId: sessionID, Kind: &kind, Limit: &limit, Tail: &tail}))
	if err != nil {
		return "", err
	}
	entries := log.Msg.GetEvents()
	slices.SortFunc(entries, func(x, y *appv1.ConversationEntry) int { return int(x.GetIdx() - y.GetIdx()) })
	var out strings.Builder
	for _, e := range entries {
		var m struct {
			Text string `json:"text"`
		}
		if json.Unmarshal([]byte(e.GetPayloadJson()), &m) == nil && m.Text != "" {
			out.WriteString(m.Text + "\n")
		}
	}
	return out.String(), nil
}
