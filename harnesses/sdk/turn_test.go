package sdk

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

func TestTurnExit(t *testing.T) {
	done := abi.Event{Kind: abi.KindTurnDone, Resume: "s1"}
	tests := []struct {
		name   string
		turn   Turn
		status int
		want   []abi.Event
	}{
		{name: "success", turn: Turn{Resume: "s1"}, status: 0, want: []abi.Event{done}},
		{name: "failure says exit status", turn: Turn{Resume: "s1"}, status: 2,
			want: []abi.Event{{Kind: abi.KindError, Text: "exit status 2"}, done}},
		{name: "failure carries diagnostics", turn: Turn{Resume: "s1", Diagnostics: "claude: not found"}, status: 127,
			want: []abi.Event{{Kind: abi.KindError, Text: "exit status 127\nclaude: not found"}, done}},
		{name: "failure already explained", turn: Turn{Resume: "s1", LastError: "rate limited"}, status: 1, want: []abi.Event{done}},
		{name: "turn the harness ended", turn: Turn{Resume: "s1", Done: true}, status: 1, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := tt.turn
			if got := turn.Exit(tt.status); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Exit(%d) = %+v, want %+v", tt.status, got, tt.want)
			}
			if !turn.Done {
				t.Fatal("turn not done after Exit")
			}
			if again := turn.Exit(tt.status); again != nil {
				t.Fatalf("a second Exit reported %+v", again)
			}
		})
	}
}

func TestTurnErrorReportsARepeatOnce(t *testing.T) {
	var turn Turn
	var got []abi.Event
	for _, msg := range []string{"overloaded", "overloaded", "", "overloaded"} {
		got = append(got, turn.Error(msg)...)
	}
	want := []abi.Event{
		{Kind: abi.KindError, Text: "overloaded"},
		{Kind: abi.KindError, Text: "unknown error"},
		{Kind: abi.KindError, Text: "overloaded"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("errors %+v, want %+v", got, want)
	}
}

func TestTurnNoteKeepsTheTail(t *testing.T) {
	var turn Turn
	turn.Note("   ")
	if turn.Tail() != "" {
		t.Fatalf("a blank line was kept: %q", turn.Tail())
	}
	for i := 0; i < 1000; i++ {
		turn.Note("line of noise ü")
	}
	turn.Note("the real reason")
	d := turn.Tail()
	if len(d) > MaxDiagnostics || !strings.HasSuffix(d, "\nthe real reason") || !strings.HasPrefix(d, "line of noise ü\n") {
		t.Fatalf("diagnostics of %d bytes: %q...%q", len(d), d[:20], d[len(d)-20:])
	}

	var long Turn
	long.Note(strings.Repeat("é", MaxDiagnostics))
	if len(long.Tail()) > MaxDiagnostics || !utf8.ValidString(long.Tail()) {
		t.Fatalf("one long line kept as %d bytes, valid UTF-8 %v", len(long.Tail()), utf8.ValidString(long.Tail()))
	}
}

// What Note keeps in its buffer is in the state a parse hands back, and the next parse's notes
// add to it.
func TestTurnNotesSurviveTheState(t *testing.T) {
	var turn Turn
	for i := range 3 * MaxDiagnostics {
		turn.Note(fmt.Sprintf("noise %d", i))
	}
	turn.Note("before the state")
	state, err := EncodeState(&turn)
	if err != nil {
		t.Fatal(err)
	}
	var next Turn
	if err := DecodeState(state, &next); err != nil {
		t.Fatal(err)
	}
	next.Note("after it")
	if d := next.Tail(); len(d) > MaxDiagnostics || !strings.HasSuffix(d, "\nbefore the state\nafter it") {
		t.Fatalf("diagnostics of %d bytes ending %q", len(d), d[max(len(d)-40, 0):])
	}
}
