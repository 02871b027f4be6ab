package harness

import (
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

func TestCheckDescriptor(t *testing.T) {
	cases := []struct {
		name string
		desc abi.Descriptor
		ok   bool
	}{
		{"a plain name", abi.Descriptor{Name: "codex"}, true},
		{"dashes, dots, digits", abi.Descriptor{Name: "claude-code.v2_beta"}, true},
		{"64 characters", abi.Descriptor{Name: strings.Repeat("a", 64)}, true},
		{"no name", abi.Descriptor{}, false},
		{"65 characters", abi.Descriptor{Name: strings.Repeat("a", 65)}, false},
		{"upper case", abi.Descriptor{Name: "Codex"}, false},
		{"a leading dash", abi.Descriptor{Name: "-codex"}, false},
		{"a path", abi.Descriptor{Name: "../codex"}, false},
		{"a space", abi.Descriptor{Name: "co dex"}, false},
		{"a model without id", abi.Descriptor{Name: "codex", Models: []abi.Option{{Label: "Fast"}}}, false},
		{"an effort without id", abi.Descriptor{Name: "codex", Effort: []abi.Option{{ID: "low"}, {}}}, false},
		{"a mode without id", abi.Descriptor{Name: "codex", Modes: []abi.Mode{{Label: "Plan"}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkDescriptor(&tc.desc); (err == nil) != tc.ok {
				t.Errorf("checkDescriptor(%+v) = %v, want ok %v", tc.desc, err, tc.ok)
			}
		})
	}
}

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
			var plan abi.Plan
			refusal, err := decodeReply([]byte(tc.reply), &plan)
			if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("decodeReply = %q, %v; want error containing %q", refusal, err, tc.bad)
			}
			if refusal != tc.refusal {
				t.Errorf("refusal %q, want %q", refusal, tc.refusal)
			}
		})
	}
}
