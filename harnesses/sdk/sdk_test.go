package sdk

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// echo is a harness whose Plan behaves as its prompt says, to drive every outcome of a call, and
// whose Parse reports all output so far, kept in State.
type echo struct{}

func (echo) Describe() abi.Descriptor { return abi.Descriptor{Name: "echo"} }

func (echo) Plan(req abi.PlanRequest) (abi.Plan, error) {
	switch req.Prompt {
	case "fail":
		return abi.Plan{}, errors.New("cannot plan that")
	case "fail silently":
		return abi.Plan{}, errors.New("")
	case "panic":
		var argv []string
		return abi.Plan{Argv: []string{argv[1]}}, nil
	}
	return abi.Plan{Argv: []string{"echo", req.Prompt}}, nil
}

func (echo) Parse(req abi.ParseRequest) (abi.ParseResult, error) {
	return abi.ParseResult{
		Events: []abi.Event{{Kind: abi.KindAssistantMessage, Text: req.State + req.Chunk}},
		State:  req.State + req.Chunk,
	}, nil
}

func decodeReply(t *testing.T, b []byte) abi.Reply {
	t.Helper()
	var r abi.Reply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %s is not JSON: %v", b, err)
	}
	if (r.OK == nil) == (r.Error == "") {
		t.Fatalf("reply %s must carry exactly one of ok and error", b)
	}
	return r
}

func TestPlanReplies(t *testing.T) {
	tests := []struct {
		name    string
		harness Harness
		request string
		want    abi.Plan
		wantErr string
	}{
		{name: "result becomes ok", harness: echo{}, request: `{"prompt":"hi"}`, want: abi.Plan{Argv: []string{"echo", "hi"}}},
		{name: "error becomes error", harness: echo{}, request: `{"prompt":"fail"}`, wantErr: "cannot plan that"},
		{name: "empty error still says something", harness: echo{}, request: `{"prompt":"fail silently"}`, wantErr: "unknown error"},
		{name: "panic becomes error", harness: echo{}, request: `{"prompt":"panic"}`, wantErr: "Plan panicked: runtime error: index out of range"},
		{name: "bad JSON is refused", harness: echo{}, request: `{"prompt":`, wantErr: "decode request"},
		{name: "wrong field type is refused", harness: echo{}, request: `{"prompt":3}`, wantErr: "decode request"},
		{name: "no harness is an error", harness: nil, request: `{"prompt":"hi"}`, wantErr: "no harness registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeReply(t, plan(tt.harness, []byte(tt.request)))
			if tt.wantErr != "" {
				if !strings.Contains(r.Error, tt.wantErr) {
					t.Fatalf("error %q, want it to contain %q", r.Error, tt.wantErr)
				}
				return
			}
			var got abi.Plan
			if err := json.Unmarshal(r.OK, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("plan %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDescribeAndParseReplies(t *testing.T) {
	var d abi.Descriptor
	if err := json.Unmarshal(decodeReply(t, describe(echo{})).OK, &d); err != nil || d.Name != "echo" {
		t.Fatalf("descriptor %+v, %v", d, err)
	}
	if r := decodeReply(t, describe(nil)); !strings.Contains(r.Error, "no harness registered") {
		t.Fatalf("describe without a harness: %q", r.Error)
	}

	var res abi.ParseResult
	r := decodeReply(t, parse(echo{}, []byte(`{"stream":"stdout","chunk":"b","state":"a"}`)))
	if err := json.Unmarshal(r.OK, &res); err != nil {
		t.Fatal(err)
	}
	want := abi.ParseResult{Events: []abi.Event{{Kind: abi.KindAssistantMessage, Text: "ab"}}, State: "ab"}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("parse result %+v, want %+v", res, want)
	}
}

// toolEcho takes client tool results: it writes each back as a line of stdin.
type toolEcho struct{ echo }

func (toolEcho) ToolResult(req abi.ToolResultRequest) (abi.ToolResult, error) {
	return abi.ToolResult{Stdin: req.ResultJSON + "\n", State: req.State + "+"}, nil
}

func TestToolResultReplies(t *testing.T) {
	tests := []struct {
		name    string
		harness Harness
		request string
		want    abi.ToolResult
		wantErr string
	}{
		{name: "a ToolResulter answers", harness: toolEcho{}, request: `{"tool_call_id":"c1","result_json":"{}","state":"s"}`, want: abi.ToolResult{Stdin: "{}\n", State: "s+"}},
		{name: "a harness without client tools says so", harness: echo{}, request: `{"tool_call_id":"c1","result_json":"{}"}`, wantErr: "harness echo takes no client tool results"},
		{name: "bad JSON is refused", harness: toolEcho{}, request: `{`, wantErr: "decode request"},
		{name: "no harness is an error", harness: nil, request: `{}`, wantErr: "no harness registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeReply(t, toolResult(tt.harness, []byte(tt.request)))
			if tt.wantErr != "" {
				if !strings.Contains(r.Error, tt.wantErr) {
					t.Fatalf("error %q, want it to contain %q", r.Error, tt.wantErr)
				}
				return
			}
			var got abi.ToolResult
			if err := json.Unmarshal(r.OK, &got); err != nil || got != tt.want {
				t.Fatalf("tool result %+v (%v), want %+v", got, err, tt.want)
			}
		})
	}
}

func TestRegisterRefusesASecondHarness(t *testing.T) {
	defer func() { registered = nil }()
	Register(echo{})
	defer func() {
		if recover() == nil {
			t.Fatal("a second Register did not panic")
		}
	}()
	Register(echo{})
}

func TestStateRoundTrip(t *testing.T) {
	type state struct {
		Out  LineBuffer `json:"out,omitzero"`
		Turn Turn       `json:"turn,omitzero"`
	}
	var first state
	if err := DecodeState("", &first); err != nil || !reflect.DeepEqual(first, state{}) {
		t.Fatalf("empty state decoded to %+v, %v", first, err)
	}
	in := state{Out: LineBuffer{Partial: "half a li"}, Turn: Turn{Resume: "s1", Done: true}}
	s, err := EncodeState(in)
	if err != nil {
		t.Fatal(err)
	}
	var out state
	if err := DecodeState(s, &out); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("state %s decoded to %+v, %v; want %+v", s, out, err, in)
	}
	if err := DecodeState("{", &out); err == nil {
		t.Fatal("a corrupt state decoded")
	}
}

func TestReplayThreadsStateAndChecksKinds(t *testing.T) {
	events, err := Replay(echo{}, Chunked("stdout", "abcde", 2)...)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range events {
		texts = append(texts, e.Text)
	}
	if !reflect.DeepEqual(texts, []string{"ab", "abcd", "abcde"}) {
		t.Fatalf("chunks %q", texts)
	}

	if _, err := Replay(badKind{}, Exited(0)); err == nil || !strings.Contains(err.Error(), `unknown kind "thought"`) {
		t.Fatalf("an unknown kind replayed with error %v", err)
	}
}

type badKind struct{ echo }

func (badKind) Parse(abi.ParseRequest) (abi.ParseResult, error) {
	return abi.ParseResult{Events: []abi.Event{{Kind: "thought"}}}, nil
}

func TestChunkedKeepsCharactersWhole(t *testing.T) {
	for _, r := range Chunked("stdout", "aé€😀b", 1) {
		if !utf8.ValidString(r.Chunk) {
			t.Fatalf("chunk %q cuts a character", r.Chunk)
		}
	}
}

func TestRawParseReplies(t *testing.T) {
	tests := []struct {
		name, request, wantText, wantErr string
	}{
		{name: "the chunk after the header is handed over as it is", request: "{\"stream\":\"stdout\",\"state\":\"a\"}\n\"b\\\"\n", wantText: "a\"b\\\"\n"},
		{name: "an empty chunk is fine", request: "{\"stream\":\"stdout\",\"state\":\"a\"}\n", wantText: "a"},
		{name: "a request without the newline is refused", request: `{"stream":"stdout"}`, wantErr: "without the newline"},
		{name: "a bad header is refused", request: "{\n", wantErr: "decode request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := decodeReply(t, parseRaw(echo{}, []byte(tt.request)))
			if tt.wantErr != "" {
				if !strings.Contains(r.Error, tt.wantErr) {
					t.Fatalf("error %q, want it to contain %q", r.Error, tt.wantErr)
				}
				return
			}
			var got abi.ParseResult
			if err := json.Unmarshal(r.OK, &got); err != nil || len(got.Events) != 1 || got.Events[0].Text != tt.wantText {
				t.Fatalf("parse result %+v (%v), want one event of %q", got, err, tt.wantText)
			}
		})
	}
}
