package sdk

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// numbered reports each stdout line as a message with its number, counted in State.
type numbered struct {
	Output
	Lines int `json:"lines"`
}

func (n *numbered) Read(line string) []abi.Event {
	n.Lines++
	return []abi.Event{{Kind: abi.KindAssistantMessage, Text: strings.Repeat("#", n.Lines) + " " + line}}
}

type numberedHarness struct{ echo }

func (numberedHarness) Parse(req abi.ParseRequest) (abi.ParseResult, error) {
	return ParseLines[numbered](req)
}

func TestParseLines(t *testing.T) {
	msg := func(text string) abi.Event { return abi.Event{Kind: abi.KindAssistantMessage, Text: text} }
	tests := []struct {
		name   string
		stdout string
		stderr string
		status int
		want   []abi.Event
	}{
		{
			name:   "stdout lines are read in order, the unfinished one at exit",
			stdout: "a\nb\nc",
			want:   []abi.Event{msg("# a"), msg("## b"), msg("### c"), {Kind: abi.KindTurnDone}},
		},
		{
			name:   "stderr only explains a failure",
			stdout: "a\n",
			stderr: "warning: slow\nfatal: no key",
			status: 2,
			want:   []abi.Event{msg("# a"), {Kind: abi.KindError, Text: "exit status 2\nwarning: slow\nfatal: no key"}, {Kind: abi.KindTurnDone}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs := append(Chunked("stdout", tt.stdout, 1), Chunked("stderr", tt.stderr, 1)...)
			got, err := Replay(numberedHarness{}, append(reqs, Exited(tt.status))...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("events\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}

	if _, err := (numberedHarness{}).Parse(abi.ParseRequest{Stream: "stdin", Chunk: "x"}); err == nil || !strings.Contains(err.Error(), `unknown stream "stdin"`) {
		t.Fatalf("unknown stream: %v", err)
	}
	if _, err := (numberedHarness{}).Parse(abi.ParseRequest{Stream: "stdout", State: "{"}); err == nil {
		t.Fatal("a corrupt state was accepted")
	}
}
