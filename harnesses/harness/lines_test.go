package harness_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	claudecode "github.com/hangar-dev/hangar/harnesses/plugins/claude-code"
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

func TestCarryHandsOnWholeLines(t *testing.T) {
	long := `{"text":"` + strings.Repeat("x", abi.MaxString+100) + `"}` + "\n"
	tests := []struct {
		name   string
		pieces []string
		want   []string // the chunks handed on, Rest's last
	}{
		{name: "whole lines go on at once", pieces: []string{"a\nb\n"}, want: []string{"a\nb\n", ""}},
		{name: "an unfinished line waits for its end", pieces: []string{"a\nb", "c", "d\ne"}, want: []string{"a\n", "", "bcd\n", "e"}},
		{name: "a line that never ends goes on at the end", pieces: []string{"abc"}, want: []string{"", "abc"}},
		{name: "a long line's strings are clipped", pieces: []string{long[:100], long[100:]}, want: []string{"", abi.ClipStrings(long, abi.MaxString), ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c harness.Carry
			var got []string
			for _, p := range tt.pieces {
				got = append(got, string(c.Next([]byte(p))))
			}
			got = append(got, string(c.Rest()))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("chunks %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCarryCutsALineLongerThanItHoldsBetweenCharacters(t *testing.T) {
	var c harness.Carry
	piece := bytes.Repeat([]byte("é"), 1<<20) // 2 MiB without a newline
	var out []byte
	for range harness.MaxCarry/len(piece) + 1 {
		out = append(out, c.Next(piece)...)
	}
	if len(out) == 0 || len(out)%2 != 0 {
		t.Fatalf("handed on %d bytes of a line longer than %d, want some, whole characters", len(out), harness.MaxCarry)
	}
}

// A plugin that exports hangar_parse_raw is handed output raw, and reads it as the same parser
// run natively does.
func TestRawParseReadsAsNative(t *testing.T) {
	p := load(t, newRuntime(t, wasm.Options{}), "claude-code")
	out := `{"type":"system","subtype":"init","session_id":"s1"}` + "\n" +
		`{"type":"assistant","message":{"content":[{"type":"text","text":"quotes \" and\nnewlines, tabs\t, é"}]}}` + "\n" +
		`{"type":"result","subtype":"success","session_id":"s1","total_cost_usd":0.5}` + "\n"
	reqs := append(sdk.Chunked("stdout", out, 40), sdk.Exited(0))
	want, err := sdk.Replay(claudecode.Harness{}, reqs...)
	if err != nil {
		t.Fatal(err)
	}
	var got []abi.Event
	state := ""
	for _, req := range reqs {
		req.State = state
		res, err := p.Parse(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		state, got = res.State, append(got, res.Events...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("through wasm\n%+v\nnatively\n%+v", got, want)
	}
}
