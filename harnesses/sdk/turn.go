package sdk

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// MaxDiagnostics bounds the tail of unrecognised output a Turn keeps.
const MaxDiagnostics = 4 << 10

// Turn is what a parser has reported so far of one run of a harness. Kept in the parser's State,
// it makes every run end the same way however the harness stops: with exactly one turn.done that
// carries the conversation id to resume, preceded by an error when the process failed without
// saying why.
type Turn struct {
	// Resume is the harness's conversation id, reported with turn.done.
	Resume string `json:"resume,omitempty"`
	// LastError is the last error reported, "" while there was none.
	LastError string `json:"last_error,omitempty"`
	// Done is set once turn.done was reported.
	Done bool `json:"done,omitempty"`
	// Diagnostics is the tail of output the parser did not understand (a harness's stderr, stray
	// lines), reported with the exit status when the process fails without an error of its own.
	Diagnostics string `json:"diagnostics,omitempty"`
}

// Error reports msg as an error of the turn; the same message twice in a row is reported once
// (harnesses tend to repeat a fatal error in their closing line).
func (t *Turn) Error(msg string) []abi.Event {
	if msg == "" {
		msg = "unknown error"
	}
	if msg == t.LastError {
		return nil
	}
	t.LastError = msg
	return []abi.Event{{Kind: abi.KindError, Text: msg}}
}

// Finish reports the end of the turn, once; later calls report nothing.
func (t *Turn) Finish() []abi.Event {
	if t.Done {
		return nil
	}
	t.Done = true
	return []abi.Event{{Kind: abi.KindTurnDone, Resume: t.Resume}}
}

// Note keeps line among the diagnostics, dropping the oldest beyond MaxDiagnostics.
func (t *Turn) Note(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	d := line
	if t.Diagnostics != "" {
		d = t.Diagnostics + "\n" + line
	}
	if len(d) > MaxDiagnostics {
		d = d[len(d)-MaxDiagnostics:]
		if i := strings.IndexByte(d, '\n'); i >= 0 {
			d = d[i+1:] // whole lines only, unless one line alone is too long
		}
		for d != "" && !utf8.RuneStart(d[0]) {
			d = d[1:]
		}
	}
	t.Diagnostics = d
}

// Exit ends the turn once the process exited with status: an error first when status is not 0
// and no error was reported, with the diagnostics (which more often than not say why), then
// turn.done. A turn the harness already ended reports nothing more.
func (t *Turn) Exit(status int) []abi.Event {
	if t.Done {
		return nil
	}
	var events []abi.Event
	if status != 0 && t.LastError == "" {
		msg := fmt.Sprintf("exit status %d", status)
		if t.Diagnostics != "" {
			msg += "\n" + t.Diagnostics
		}
		events = t.Error(msg)
	}
	return append(events, t.Finish()...)
}
