package harness

import (
	"errors"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/runtimes/wasm"
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

func TestTheABIFollowsTheRuntimesCallingConvention(t *testing.T) {
	if abi.ExportAlloc != wasm.ExportAlloc {
		t.Fatalf("abi.ExportAlloc %q, runtimes/wasm calls %q", abi.ExportAlloc, wasm.ExportAlloc)
	}
}

// FuzzPluginAnswers feeds what a harness plugin may answer to each export through the same
// decoding and checks the host applies: an answer is accepted, refused or an error, never a
// panic, and an accepted one keeps the ABI's rules (a named descriptor, a plan with a command,
// events of known kinds).
func FuzzPluginAnswers(f *testing.F) {
	for _, seed := range []struct {
		export uint8
		answer string
	}{
		{0, `{"ok":{"name":"echo","models":[{"id":"m"}],"modes":[{"id":"plan"}]}}`},
		{0, `{"ok":{"name":"Echo"}}`}, {0, `{"ok":{"name":"echo","effort":[{}]}}`},
		{1, `{"ok":{"argv":["sh","-c","echo hi"],"files":[{"path":"/tmp/x","content":"y"}]}}`},
		{1, `{"ok":{"argv":[]}}`}, {1, `{"ok":{"argv":[""]}}`}, {1, `{"error":"unknown model"}`},
		{2, `{"ok":{"events":[{"kind":"assistant.message","text":"hi"}]}}`},
		{2, `{"ok":{"events":[{"kind":"assistant.thought"}]}}`}, {2, `{"ok":{}}`},
		{3, `{"ok":{"stdin":"x"}}`}, {3, `{"ok":{"unknown":1}}`},
	} {
		f.Add(seed.export, []byte(seed.answer))
	}
	f.Fuzz(func(t *testing.T, export uint8, answer []byte) {
		var err error
		switch export % 4 {
		case 0:
			var d abi.Descriptor
			if err = decodeAndCheck(answer, &d, checkDescriptor); err == nil && !harnessName.MatchString(d.Name) {
				t.Fatalf("accepted a descriptor named %q", d.Name)
			}
		case 1:
			var p abi.Plan
			if err = decodeAndCheck(answer, &p, checkPlan); err == nil && (len(p.Argv) == 0 || p.Argv[0] == "") {
				t.Fatalf("accepted a plan without a command: %+v", p)
			}
		case 2:
			var r abi.ParseResult
			if err = decodeAndCheck(answer, &r, checkParseResult); err == nil {
				for _, e := range r.Events {
					if !eventKinds[e.Kind] {
						t.Fatalf("accepted an event of kind %q", e.Kind)
					}
				}
			}
		case 3:
			var r abi.ToolResult
			_ = decodeAndCheck(answer, &r, func(*abi.ToolResult) error { return nil })
		}
	})
}

// decodeAndCheck is what wasm.Ask does with an answer once it is out of the module's memory.
func decodeAndCheck[T any](answer []byte, res *T, check func(*T) error) error {
	refusal, err := wasm.DecodeReply(answer, res)
	if err != nil || refusal != "" {
		return errors.Join(err, errors.New(refusal))
	}
	return check(res)
}
