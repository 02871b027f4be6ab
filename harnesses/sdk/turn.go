package sdk

import (
	"bytes"
	"encoding/json"
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
	// Note keeps it in a buffer and updates it when it is read (Tail) or encoded, so that a
	// line costs its own length, not a copy of the tail: a harness printing megabytes of noise
	// would otherwise have its parser's garbage collector copy gigabytes.
	Diagnostics string `json:"diagnostics,omitempty"`

	// notes is the tail being written, longer than MaxDiagnostics by up to as much again, nil
	// while Diagnostics is current.
	notes []byte
}

// MarshalJSON encodes the turn with its diagnostics current.
func (t Turn) MarshalJSON() ([]byte, error) {
	type plain Turn // without the method
	p := plain(t)
	p.Diagnostics = t.Tail()
	p.notes = nil
	return json.Marshal(p)
}

// Tail is the turn's diagnostics: the last MaxDiagnostics bytes at most of the lines noted, in
// whole lines unless one line alone is too long.
func (t *Turn) Tail() string {
	if t.notes != nil {
		t.Diagnostics, t.notes = tailOf(t.notes), nil
	}
	return t.Diagnostics
}

// tailOf is the last MaxDiagnostics bytes of b, from a line's start when b is longer, and never
// from inside a character.
func tailOf(b []byte) string {
	if len(b) <= MaxDiagnostics {
		return string(b)
	}
	d := b[len(b)-MaxDiagnostics:]
	if i := bytes.IndexByte(d, '\n'); i >= 0 {
		d = d[i+1:] // whole lines only, unless one line alone is too long
	}
	for len(d) > 0 && !utf8.RuneStart(d[0]) {
		d = d[1:]
	}
	return string(d)
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
	if t.notes == nil {
		t.notes = append(make([]byte, 0, 2*MaxDiagnostics+1), t.Diagnostics...)
	}
	if len(t.notes) > 0 {
		t.notes = append(t.notes, '\n')
	}
	// Of a line longer than the tail, only its end can be kept; a byte more shows it was cut.
	t.notes = append(t.notes, line[max(len(line)-MaxDiagnostics-1, 0):]...)
	if len(t.notes) > 2*MaxDiagnostics {
		// Once per MaxDiagnostics bytes noted, at most: the copying stays linear.
		t.notes = append(t.notes[:0], tailOf(t.notes)...)
	}
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
		if d := t.Tail(); d != "" {
			msg += "\n" + d
		}
		events = t.Error(msg)
	}
	return append(events, t.Finish()...)
}
