package bash

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/harnesses/sdk/sdktest"
	"github.com/hangar-dev/hangar/internal/testkit"
)

// run executes a plan here, as the sandbox would, with PATH set to path.
func run(t *testing.T, plan abi.Plan, path string) (stdout, stderr string, status int) {
	t.Helper()
	cmd := exec.Command(plan.Argv[0], plan.Argv[1:]...)
	cmd.Env = []string{"PATH=" + path}
	for k, v := range plan.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

func TestPlanRunsThePromptAsAScript(t *testing.T) {
	testkit.RequireTool(t, "bash", "apt-get install bash; it tells the two shells apart")
	noBash := t.TempDir() // a PATH without bash: the launcher falls back to /bin/sh
	tests := []struct {
		name       string
		prompt     string
		env        map[string]string
		path       string
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{name: "output", prompt: "echo hello", path: os.Getenv("PATH"), wantOut: "hello\n"},
		{name: "bash when there is bash", prompt: `echo "${BASH_VERSION:+bash}"`, path: os.Getenv("PATH"), wantOut: "bash\n"},
		{name: "sh without bash", prompt: `echo "${BASH_VERSION:+bash}sh"`, path: noBash, wantOut: "sh\n"},
		{name: "quotes and dollars", prompt: `x='a "b" $c'; printf '%s\n' "$x"`, path: os.Getenv("PATH"), wantOut: "a \"b\" $c\n"},
		{name: "leading dash", prompt: "-x() { echo dash; }; -x", path: os.Getenv("PATH"), wantOut: "dash\n"},
		{name: "env passed", prompt: `echo "$GREETING"`, env: map[string]string{"GREETING": "hi"}, path: os.Getenv("PATH"), wantOut: "hi\n"},
		{name: "stderr and status", prompt: "echo oops >&2; exit 3", path: os.Getenv("PATH"), wantErr: "oops\n", wantStatus: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: tt.prompt, Env: tt.env})
			if err != nil {
				t.Fatal(err)
			}
			out, errOut, status := run(t, plan, tt.path)
			if out != tt.wantOut || errOut != tt.wantErr || status != tt.wantStatus {
				t.Fatalf("got stdout %q stderr %q status %d, want %q %q %d", out, errOut, status, tt.wantOut, tt.wantErr, tt.wantStatus)
			}
		})
	}
}

func msg(text string) abi.Event { return abi.Event{Kind: abi.KindAssistantMessage, Text: text} }

var done = abi.Event{Kind: abi.KindTurnDone}

func TestParse(t *testing.T) {
	chunk := func(stream, text string) abi.ParseRequest { return abi.ParseRequest{Stream: stream, Chunk: text} }
	tests := []struct {
		name     string
		requests []abi.ParseRequest
		want     []abi.Event
	}{
		{
			name:     "complete lines of a chunk are one message",
			requests: []abi.ParseRequest{chunk("stdout", "a\nb\n"), sdk.Exited(0)},
			want:     []abi.Event{msg("a\nb"), done},
		},
		{
			name:     "a line split across chunks waits for its end",
			requests: []abi.ParseRequest{chunk("stdout", "hel"), chunk("stdout", "lo\nwor"), chunk("stdout", "ld\n"), sdk.Exited(0)},
			want:     []abi.Event{msg("hello"), msg("world"), done},
		},
		{
			name:     "streams keep their own unfinished lines",
			requests: []abi.ParseRequest{chunk("stdout", "out "), chunk("stderr", "err "), chunk("stdout", "line\n"), chunk("stderr", "line\n"), sdk.Exited(0)},
			want:     []abi.Event{msg("out line"), msg("err line"), done},
		},
		{
			name:     "unfinished lines are reported at exit",
			requests: []abi.ParseRequest{chunk("stdout", "no newline"), chunk("stderr", "nor here"), sdk.Exited(0)},
			want:     []abi.Event{msg("no newline"), msg("nor here"), done},
		},
		{
			name:     "failure ends with its exit status",
			requests: []abi.ParseRequest{chunk("stderr", "boom\n"), sdk.Exited(3)},
			want:     []abi.Event{msg("boom"), {Kind: abi.KindError, Text: "exit status 3"}, done},
		},
		{
			name:     "blank output is not reported",
			requests: []abi.ParseRequest{chunk("stdout", "\n \n"), chunk("stdout", "x\n\n"), sdk.Exited(0)},
			want:     []abi.Event{msg("x\n"), done},
		},
		{
			name:     "no output",
			requests: []abi.ParseRequest{sdk.Exited(0)},
			want:     []abi.Event{done},
		},
		{
			name:     "a tool call line is a client tool call between messages",
			requests: []abi.ParseRequest{chunk("stdout", "before\n::hangar-tool-call::id-1 weather {\"city\":"), chunk("stdout", "\"Paris\"}\nafter\n"), sdk.Exited(0)},
			want:     []abi.Event{msg("before"), sdktest.ClientToolCall("id-1", "weather", `{"city":"Paris"}`), msg("after"), done},
		},
		{
			name:     "a tool call's input that is not JSON is a string",
			requests: []abi.ParseRequest{chunk("stdout", "::hangar-tool-call::id-2 echo not json\n"), sdk.Exited(0)},
			want:     []abi.Event{sdktest.ClientToolCall("id-2", "echo", `"not json"`), done},
		},
		{
			name:     "a tool call line cut off by the exit still counts",
			requests: []abi.ParseRequest{chunk("stdout", "::hangar-tool-call::id-3 t {}"), sdk.Exited(1)},
			want:     []abi.Event{sdktest.ClientToolCall("id-3", "t", "{}"), {Kind: abi.KindError, Text: "exit status 1"}, done},
		},
		{
			name:     "a tool call line without a name, or on stderr, is output",
			requests: []abi.ParseRequest{chunk("stdout", "::hangar-tool-call::id-4\n"), chunk("stderr", "::hangar-tool-call::id-5 t {}\n"), sdk.Exited(0)},
			want:     []abi.Event{msg("::hangar-tool-call::id-4"), msg("::hangar-tool-call::id-5 t {}"), done},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sdk.Replay(Harness{}, tt.requests...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("events\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseRefusesAnUnknownStream(t *testing.T) {
	_, err := Harness{}.Parse(abi.ParseRequest{Stream: "stdin", Chunk: "x"})
	if err == nil || !strings.Contains(err.Error(), `unknown stream "stdin"`) {
		t.Fatalf("error %v", err)
	}
}

// The real output of a planned script, cut into chunks of any size, tells the same story.
func TestPlannedScriptParsesTheSameInAnyChunking(t *testing.T) {
	plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: "printf 'one\\ntwo\\nthree'; echo warn >&2; exit 1"})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, status := run(t, plan, os.Getenv("PATH"))
	for _, size := range []int{1, 4, 100} {
		reqs := append(sdk.Chunked("stdout", out, size), sdk.Chunked("stderr", errOut, size)...)
		got, err := sdk.Replay(Harness{}, append(reqs, sdk.Exited(status))...)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, e := range got[:len(got)-2] {
			lines = append(lines, e.Text)
		}
		end := []abi.Event{{Kind: abi.KindError, Text: "exit status 1"}, done}
		if strings.Join(lines, "\n") != "one\ntwo\nwarn\nthree" || !reflect.DeepEqual(got[len(got)-2:], end) {
			t.Fatalf("chunks of %d: %+v", size, got)
		}
	}
}

func TestToolResultIsALineOfStdin(t *testing.T) {
	sdktest.CheckToolResults(t, Harness{}, []sdktest.ToolResultCase{
		{Name: "compacted onto one line", Req: abi.ToolResultRequest{ToolCallID: "c", ResultJSON: "{\n  \"temp\": 21,\n  \"sky\": \"clear\"\n}"}, Want: abi.ToolResult{Stdin: `{"temp":21,"sky":"clear"}` + "\n"}},
		{Name: "a string", Req: abi.ToolResultRequest{ToolCallID: "c", ResultJSON: `"sunny"`}, Want: abi.ToolResult{Stdin: `"sunny"` + "\n"}},
		{Name: "not JSON", Req: abi.ToolResultRequest{ToolCallID: "c", ResultJSON: "{"}, WantErr: "result_json of c"},
	})
}

// A planned script's client tool call, answered through its stdin as the host does, gives the
// script its result; the script's own stdin stays /dev/null.
func TestPlannedScriptCallsAClientTool(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		script  string
		results []string // result_json of each call, in order
		want    string   // stdout after the tool call lines
	}{
		{
			name:    "bash, result captured by $(…)",
			path:    os.Getenv("PATH"),
			script:  `x=$(hangar_tool weather '{"city":"Paris"}'); echo "got $x"; cat; echo end`,
			results: []string{`{"temp": 21}`},
			want:    "got {\"temp\":21}\nend\n",
		},
		{
			name:    "sh, two calls one after the other",
			path:    t.TempDir(), // no bash on PATH
			script:  `a=$(hangar_tool one); b=$(hangar_tool two '[2]'); echo "$a $b"`,
			results: []string{`1`, `"two"`},
			want:    "1 \"two\"\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: tt.script})
			if err != nil || !plan.KeepStdin {
				t.Fatalf("plan %+v, %v; want one keeping stdin open", plan, err)
			}
			cmd := exec.Command(plan.Argv[0], plan.Argv[1:]...)
			cmd.Env = []string{"PATH=" + tt.path}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := bufio.NewReader(stdout)
			for i, result := range tt.results {
				line, err := out.ReadString('\n')
				if err != nil {
					t.Fatalf("call %d: %v (stderr %q)", i, err, stderr.String())
				}
				events, err := sdk.Replay(Harness{}, abi.ParseRequest{Stream: "stdout", Chunk: line})
				if err != nil || len(events) != 1 || !events[0].Client || events[0].ToolCallID == "" {
					t.Fatalf("call %d: line %q parsed as %+v, %v; want one client tool call", i, line, events, err)
				}
				res, err := Harness{}.ToolResult(abi.ToolResultRequest{ToolCallID: events[0].ToolCallID, ResultJSON: result})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(stdin, res.Stdin); err != nil {
					t.Fatal(err)
				}
			}
			rest, err := io.ReadAll(out)
			if err != nil {
				t.Fatal(err)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil || string(rest) != tt.want {
				t.Fatalf("then printed %q (%v, stderr %q), want %q", rest, err, stderr.String(), tt.want)
			}
		})
	}
}

func TestToolCallWithoutAResultFails(t *testing.T) {
	tests := []struct {
		name, script, wantOut, wantErr string
	}{
		{"stdin closed", `hangar_tool weather || echo "failed $?"`, "failed 1\n", "no result for weather"},
		{"a bad name", `hangar_tool 'a b' || echo "failed $?"`, "failed 2\n", "usage: hangar_tool NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Harness{}.Plan(abi.PlanRequest{Prompt: tt.script})
			if err != nil {
				t.Fatal(err)
			}
			// run gives the plan /dev/null as stdin: closed from the start.
			out, errOut, status := run(t, plan, os.Getenv("PATH"))
			if status != 0 || !strings.HasSuffix(out, tt.wantOut) || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("stdout %q stderr %q status %d, want %q and a failed call saying %q", out, errOut, status, tt.wantOut, tt.wantErr)
			}
		})
	}
}
