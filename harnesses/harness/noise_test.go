package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	claudecode "github.com/hangar-dev/hangar/harnesses/plugins/claude-code"
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// A harness that prints 100 MiB of noise (stderr, and stdout lines that are no JSON) before its
// real output loses none of it: the real Claude Code plugin, run as WebAssembly under the host's
// memory cap, reports every event of the recorded run after the noise, as the parser does
// natively without it. Run on instances recycled at the default bounds and on ones recycled
// every 100 calls, whose parse state travels with the requests.
func TestNoiseDoesNotStarveThePlugin(t *testing.T) {
	real, err := os.ReadFile("../plugins/claude-code/testdata/real-edit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want, err := sdk.Replay(claudecode.Harness{}, sdk.Chunked("stdout", string(real), 1<<20)[0], sdk.Exited(0))
	if err != nil {
		t.Fatal(err)
	}
	const noise = 50 << 20 // of each stream
	stderrLine := []byte("npm warn deprecated some-package@1.0.0: this version is no longer supported, please update\n")
	stdoutLine := []byte("Warning: the stdout of a wrapper that is no JSON at all, over and over again ~~~~~~~~~~~~\n")
	for _, tc := range []struct {
		name string
		opts wasm.Options
	}{
		{"instances recycled at the default bounds", wasm.Options{Instances: 1}},
		{"an instance recycled every 100 calls", wasm.Options{Instances: 1, RecycleCalls: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, newRuntime(t, tc.opts), "claude-code")
			ctx := context.Background()
			var state string
			var got []abi.Event
			parse := func(stream string, data []byte) {
				t.Helper()
				res, err := p.Parse(ctx, abi.ParseRequest{Stream: stream, Chunk: string(data), State: state})
				if err != nil {
					t.Fatalf("parse %d bytes of %s after %d events: %v", len(data), stream, len(got), err)
				}
				state = res.State
				got = append(got, res.Events...)
			}
			// The host's chunks: whole lines, as the supervisor's output frames (32 KiB) bring them.
			var carry [2]harness.Carry
			feed := func(i int, stream string, data []byte) {
				for len(data) > 0 {
					n := min(32<<10, len(data))
					if chunk := carry[i].Next(data[:n]); len(chunk) > 0 {
						parse(stream, chunk)
					}
					data = data[n:]
				}
			}
			errBlock := bytes.Repeat(stderrLine, (1<<20)/len(stderrLine))
			outBlock := bytes.Repeat(stdoutLine, (1<<20)/len(stdoutLine))
			for range noise >> 20 {
				feed(1, "stderr", errBlock)
				feed(0, "stdout", outBlock)
			}
			feed(0, "stdout", real)
			for i, stream := range []string{"stdout", "stderr"} {
				if rest := carry[i].Rest(); len(rest) > 0 {
					parse(stream, rest)
				}
			}
			res, err := p.Parse(ctx, abi.ParseRequest{Final: true, State: state})
			if err != nil {
				t.Fatalf("the final parse: %v", err)
			}
			got = append(got, res.Events...)
			if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
				t.Fatalf("%d events after the noise:\n%s\nwant %d:\n%s", len(got), g, len(want), w)
			}
			if len(state) > 64<<10 || strings.Count(state, "npm warn") > 64 {
				t.Errorf("the parse state holds %d bytes after the noise", len(state))
			}
		})
	}
}

// mustJSON is v as JSON, to compare events as the host logs them (a tool call's input as
// compact JSON, however the plugin spaced it).
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
