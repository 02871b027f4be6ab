package wasm

import (
	"strings"
	"testing"
)

func TestDecodeReply(t *testing.T) {
	cases := []struct {
		reply   string
		refusal string
		bad     string // part of the error, "" for none
	}{
		{reply: `{"ok":{"argv":["true"]}}`},
		{reply: `{"error":"no such model"}`, refusal: "no such model"},
		{reply: `{"ok":null,"error":"no such model"}`, refusal: "no such model"},
		{reply: ``, bad: "nothing"},
		{reply: `{"ok":null}`, bad: "neither"},
		{reply: `{"error":""}`, bad: "neither"},
		{reply: `{"ok":{"argv":["true"]},"error":"x"}`, bad: "both"},
		{reply: `{"ok":{"argv":["true"]}}x`, bad: "data after"},
		{reply: `{"ok":{"argv":["true"],"cwd":"/"}}`, bad: `unknown field "cwd"`},
		{reply: `{"ok":{"argv":"true"}}`, bad: "cannot unmarshal"},
		{reply: `{"error":7}`, bad: "cannot unmarshal"},
		{reply: `[]`, bad: "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.reply, func(t *testing.T) {
			var plan struct {
				Argv []string `json:"argv"`
			}
			refusal, err := DecodeReply([]byte(tc.reply), &plan)
			if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("DecodeReply = %q, %v; want error containing %q", refusal, err, tc.bad)
			}
			if refusal != tc.refusal {
				t.Errorf("refusal %q, want %q", refusal, tc.refusal)
			}
		})
	}
}
