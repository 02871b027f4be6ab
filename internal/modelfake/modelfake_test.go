package modelfake

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// stream posts body to path of s with key and returns the types of the server-sent events in the
// answer and their data, in order.
func stream(t *testing.T, s *Server, path, key, body string) ([]string, []map[string]any, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var data []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if typ, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			types = append(types, typ)
		}
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("data %q: %v", d, err)
			}
			data = append(data, m)
		}
	}
	return types, data, sc.Err()
}

func TestMessagesStreamsTheScriptStepOfTheConversation(t *testing.T) {
	s := Start(Script{Match: "fix it", Steps: []Step{
		{Text: "Looking.", Tool: &ToolCall{Name: "Read", Input: map[string]any{"file_path": "/a"}}},
		{Text: "Done."},
	}})
	defer s.Close()
	tests := []struct {
		name, body string
		want       []string
		text       string
	}{
		{
			name: "a new conversation gets the first step: text, then the tool call",
			body: `{"model":"m","stream":true,"messages":[{"role":"user","content":"please fix it"}]}`,
			want: []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			text: "Looking.",
		},
		{
			name: "a conversation with one tool result gets the second",
			body: `{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"please fix it"}]},{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`,
			want: []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			text: "Done.",
		},
		{
			name: "a conversation no script matches gets a short answer",
			body: `{"model":"m","stream":true,"messages":[{"role":"user","content":"write a title"}]}`,
			want: []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			text: "OK.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			types, data, err := stream(t, s, "/v1/messages", "k1", tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(types, tt.want) {
				t.Fatalf("events %q, want %q", types, tt.want)
			}
			if got := data[3]["delta"].(map[string]any)["text"]; got != tt.text {
				t.Errorf("text %v, want %q", got, tt.text)
			}
		})
	}
	if creds := s.Credentials(); !slices.Equal(creds, []string{"k1"}) {
		t.Errorf("credentials %q, want the one key sent", creds)
	}
}

func TestResponsesStreamsCallsAndDropsWhenAsked(t *testing.T) {
	s := Start(Script{Match: "fix it", Steps: []Step{
		{Tool: &ToolCall{Name: "exec_command", Input: map[string]any{"cmd": "ls"}}, DropTimes: 1},
	}})
	defer s.Close()
	body := `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]}]}`
	if _, _, err := stream(t, s, "/v1/responses", "k", body); err == nil {
		t.Fatal("the first answer was not cut off")
	}
	types, data, err := stream(t, s, "/v1/responses", "k", body)
	if err != nil {
		t.Fatalf("the retry was cut off too: %v", err)
	}
	if want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.output_item.done", "response.completed"}; !slices.Equal(types, want) {
		t.Fatalf("events %q, want %q", types, want)
	}
	item := data[3]["item"].(map[string]any)
	if item["type"] != "function_call" || item["name"] != "exec_command" || item["arguments"] != `{"cmd":"ls"}` {
		t.Errorf("the call is %v", item)
	}
	resp, err := http.Get(s.URL + "/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("a WebSocket attempt got %d, want 426 so Codex falls back to HTTP at once", resp.StatusCode)
	}
}
