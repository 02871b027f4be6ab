package modelfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// The Anthropic Messages API, as Claude Code calls it: POST /v1/messages with "stream": true,
// answered with server-sent events message_start, content_block_start / _delta / _stop per
// block (text_delta for text, input_json_delta for a tool_use's input), message_delta (stop
// reason and output usage) and message_stop.

// anthropicRequest is the part of a Messages request the fake reads.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var ids atomic.Int64

func nextID(prefix string) string { return fmt.Sprintf("%s_fake%06d", prefix, ids.Add(1)) }

// conversation is the text of a Messages request's user messages and its count of tool results.
func (req anthropicRequest) conversation() (said string, results int) {
	var all []string
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			var blocks []anthropicBlock
			json.Unmarshal(m.Content, &blocks)
			var texts []string
			for _, b := range blocks {
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "tool_result":
					results++
				}
			}
			text = strings.Join(texts, "\n")
		}
		all = append(all, text)
	}
	return strings.Join(all, "\n"), results
}

func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.record(r, body)
	writeJSON(w, map[string]any{"input_tokens": len(body) / 4})
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	s.record(r, body)
	var req anthropicRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	st, model, dropIt := s.step(req.conversation())
	if model == "" {
		model = req.Model
	}
	msg := map[string]any{
		"id": nextID("msg"), "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": st.InputTokens, "output_tokens": 1, "cache_creation_input_tokens": st.CacheWriteTokens, "cache_read_input_tokens": st.CacheReadTokens},
	}
	var content []any
	if st.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": st.Text})
	}
	stop := "end_turn"
	if st.Tool != nil {
		stop = "tool_use"
		content = append(content, map[string]any{"type": "tool_use", "id": nextID("toolu"), "name": st.Tool.Name, "input": st.Tool.Input})
	}
	if !req.Stream {
		msg["content"], msg["stop_reason"] = content, stop
		msg["usage"].(map[string]any)["output_tokens"] = st.OutputTokens
		writeJSON(w, msg)
		return
	}
	e := newSSE(w)
	e.send("message_start", map[string]any{"type": "message_start", "message": msg})
	if dropIt {
		drop()
	}
	e.send("ping", map[string]any{"type": "ping"})
	for i, c := range content {
		block := c.(map[string]any)
		start := map[string]any{}
		for k, v := range block {
			start[k] = v
		}
		var delta map[string]any
		switch block["type"] {
		case "text":
			start["text"] = ""
			delta = map[string]any{"type": "text_delta", "text": block["text"]}
		case "tool_use":
			start["input"] = map[string]any{}
			delta = map[string]any{"type": "input_json_delta", "partial_json": mustJSON(block["input"])}
		}
		e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": st.OutputTokens},
	})
	e.send("message_stop", map[string]any{"type": "message_stop"})
}
