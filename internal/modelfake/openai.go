package modelfake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// The OpenAI Responses API, as Codex calls it: POST /v1/responses with "stream": true, answered
// with server-sent events response.created, then per output item response.output_item.added,
// its deltas (response.output_text.delta for a message) and response.output_item.done, and
// response.completed with the usage. Codex keeps no server-side state (store: false): each
// request's input holds the whole conversation, tool calls and their outputs included.

type responsesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Input  []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"input"`
}

// conversation is the text of a Responses request's user messages and its count of tool
// outputs.
func (req responsesRequest) conversation() (said string, results int) {
	var all []string
	for _, it := range req.Input {
		switch it.Type {
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			results++
		case "message", "":
			if it.Role != "user" {
				continue
			}
			var text string
			if json.Unmarshal(it.Content, &text) != nil {
				var parts []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				json.Unmarshal(it.Content, &parts)
				for _, p := range parts {
					if p.Type == "input_text" {
						text += p.Text + "\n"
					}
				}
			}
			all = append(all, text)
		}
	}
	return strings.Join(all, "\n"), results
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s.record(r, body)
	var req responsesRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	st, model, dropIt := s.step(req.conversation())
	if model == "" {
		model = req.Model
	}
	var output []map[string]any
	if st.Text != "" {
		output = append(output, map[string]any{
			"id": nextID("msg"), "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": st.Text, "annotations": []any{}}},
		})
	}
	if t := st.Tool; t != nil {
		if t.Custom {
			input, _ := t.Input.(string)
			output = append(output, map[string]any{"id": nextID("ctc"), "type": "custom_tool_call", "status": "completed", "call_id": nextID("call"), "name": t.Name, "input": input})
		} else {
			output = append(output, map[string]any{"id": nextID("fc"), "type": "function_call", "status": "completed", "call_id": nextID("call"), "name": t.Name, "arguments": mustJSON(t.Input)})
		}
	}
	resp := map[string]any{
		"id": nextID("resp"), "object": "response", "created_at": time.Now().Unix(), "status": "in_progress",
		"model": model, "output": []any{}, "usage": nil,
	}
	e := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		e.send(typ, fields)
	}
	send("response.created", map[string]any{"response": resp})
	if dropIt {
		drop()
	}
	send("response.in_progress", map[string]any{"response": resp})
	for i, it := range output {
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		added["status"] = "in_progress"
		if it["type"] == "message" {
			added["content"] = []any{}
		}
		send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		if it["type"] == "message" {
			send("response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "delta": st.Text})
			send("response.output_text.done", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "text": st.Text})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	done := map[string]any{}
	for k, v := range resp {
		done[k] = v
	}
	done["status"], done["output"] = "completed", output
	done["usage"] = map[string]any{
		"input_tokens": st.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": st.CacheReadTokens},
		"output_tokens": st.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": st.InputTokens + st.OutputTokens,
	}
	send("response.completed", map[string]any{"response": done})
}
