// Package eventlog owns a session's event log in Firestore: the single Writer a session's host
// uses to number and store events, and the Reader that API functions on any machine use to page
// through the log (List, Tail) or follow it live (Follow).
//
// Events live at sessions/{session_id}/events/{idx as %020d} with the fields idx, kind,
// payload_json, at, tool_name and durable. idx starts at 1 and grows by one with no holes; a
// reader never sees an idx before every smaller idx is readable. Filtered List calls need
// composite indexes on production Firestore (the emulator needs none): idx with each of kind,
// tool_name and durable, and with the combinations a caller uses.
//
// Event kinds are open strings. The kinds the host emits and their payloads are listed in the
// docs/sessions.md ("Session events"), the one place a client reads them.
//
// Agent-turn kinds (prompt.queued, prompt.started, assistant.message, tool.call, tool.result,
// turn.done, interrupted) are named here so that IsConversation can know them; their payloads
// are defined by the code that emits them. Tool events carry the tool's name in ToolName so
// readers can filter on it.
package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
)

// Kinds the host emits; see the package doc for their payloads.
const (
	KindSessionStatus   = "session.status"
	KindExecStarted     = "exec.started"
	KindExecExited      = "exec.exited"
	KindFileWritten     = "file.written"
	KindSnapshotTaken   = "snapshot.taken"
	KindSessionResumed  = "session.resumed"
	KindSessionEvicted  = "session.evicted"
	KindArtifactCreated = "artifact.created"
	KindShellOpened     = "shell.opened"
	KindShellClosed     = "shell.closed"
	// KindNetUsage carries a session's running network totals through the egress proxy.
	KindNetUsage = "net.usage"

	KindPromptQueued     = "prompt.queued"
	KindPromptStarted    = "prompt.started"
	KindPromptEdited     = "prompt.edited"
	KindPromptDequeued   = "prompt.dequeued"
	KindUsage            = "usage"
	KindError            = "error"
	KindAssistantMessage = "assistant.message"
	KindToolCall         = "tool.call"
	KindToolResult       = "tool.result"
	KindTurnDone         = "turn.done"
	KindInterrupted      = "interrupted"
)

// conversationKinds are the kinds SessionService.GetLog turns into conversation entries: the
// agent turns, plus the commands and artifacts a user sees in a transcript.
var conversationKinds = map[string]bool{
	KindPromptQueued:     true,
	KindPromptStarted:    true,
	KindPromptEdited:     true,
	KindPromptDequeued:   true,
	KindError:            true,
	KindAssistantMessage: true,
	KindToolCall:         true,
	KindToolResult:       true,
	KindTurnDone:         true,
	KindInterrupted:      true,
	KindExecStarted:      true,
	KindExecExited:       true,
	KindArtifactCreated:  true,
}

// IsConversation reports whether events of kind belong in the conversation log (GetLog).
func IsConversation(kind string) bool {
	return conversationKinds[kind]
}

// ConversationKinds returns the conversation kinds, for a query filtered on them (at most
// MaxFilterValues, so one List call can ask for all of them).
func ConversationKinds() []string {
	return slices.Sorted(maps.Keys(conversationKinds))
}

// Event is one entry of a session's log.
type Event struct {
	// Idx is assigned by the Writer: 1 for the first event of a session, then +1 each.
	Idx  int64  `firestore:"idx"`
	Kind string `firestore:"kind"`
	// PayloadJSON is a JSON object; Append stores "{}" for an empty one.
	PayloadJSON string `firestore:"payload_json"`
	// At is when the event happened; Append fills it in when zero.
	At time.Time `firestore:"at"`
	// ToolName names the tool of tool events, "" for the rest.
	ToolName string `firestore:"tool_name"`
	// Durable marks events that belong to the session's permanent record, as opposed to
	// progress (streamed output, partial messages) that readers asking for durable events
	// only (StreamEvents durable_only) skip. The caller decides; the zero value is false.
	Durable bool `firestore:"durable"`
}

// MaxPayloadBytes caps an event's payload_json. Firestore documents hold at most 1 MiB and a
// commit at most 10 MiB; bulky data belongs in artifacts or blobs, with the event pointing to it.
const MaxPayloadBytes = 512 << 10

// normalizePayload returns a storable JSON object for payload. A payload that is not a valid
// JSON object, or is too big, is a bug in the emitting code; it is replaced by a marker object
// rather than dropped, because dropping would leave a hole in the idx sequence, and rather than
// failing the session operation that emitted it. The second result says what was wrong.
func normalizePayload(payload string) (string, error) {
	trimmed := strings.TrimSpace(payload)
	switch {
	case trimmed == "":
		return "{}", nil
	case len(payload) > MaxPayloadBytes:
		return `{"payload_dropped":"too_large","size_bytes":` + strconv.Itoa(len(payload)) + `}`,
			fmt.Errorf("payload of %d bytes exceeds %d", len(payload), MaxPayloadBytes)
	case trimmed[0] != '{' || !utf8.ValidString(payload) || !json.Valid([]byte(payload)):
		return `{"payload_dropped":"not_a_json_object","size_bytes":` + strconv.Itoa(len(payload)) + `}`,
			errors.New("payload is not a valid JSON object")
	}
	return payload, nil
}

// eventsOf returns the events collection of a session, refusing ids Firestore cannot hold.
func eventsOf(db *firestore.Client, sessionID string) (*firestore.CollectionRef, error) {
	if sessionID == "" || strings.Contains(sessionID, "/") || !utf8.ValidString(sessionID) {
		return nil, &QueryError{Field: "session_id", Reason: fmt.Sprintf("%q is not a session id", sessionID)}
	}
	return db.Collection("sessions").Doc(sessionID).Collection("events"), nil
}

// docID names an event's document so that the document order matches idx order too.
func docID(idx int64) string {
	return fmt.Sprintf("%020d", idx)
}
