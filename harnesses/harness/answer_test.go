package harness

import (
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
