package sdk

import (
	"strings"
	"unicode/utf8"
)

// MaxLine bounds a line a LineBuffer holds: the rest of a longer line is dropped (at a character
// boundary), so a harness printing without newlines cannot grow a parser's State without limit.
const MaxLine = 4 << 20

// LineBuffer splits output that arrives in chunks into lines, carrying the unfinished last line
// of a chunk to the next one. It is meant to be part of a parser's State.
type LineBuffer struct {
	Partial string `json:"partial,omitempty"`
}

// Feed returns the lines chunk completes, without their line endings ("\n" or "\r\n").
func (b *LineBuffer) Feed(chunk string) []string {
	var lines []string
	for {
		line, rest, complete := strings.Cut(chunk, "\n")
		b.add(line)
		if !complete {
			return lines
		}
		lines = append(lines, strings.TrimSuffix(b.Partial, "\r"))
		b.Partial = ""
		chunk = rest
	}
}

// Flush returns the unfinished line once the output has ended, and empties the buffer.
func (b *LineBuffer) Flush() (line string, ok bool) {
	line, ok = strings.TrimSuffix(b.Partial, "\r"), b.Partial != ""
	b.Partial = ""
	return line, ok
}

func (b *LineBuffer) add(s string) {
	room := MaxLine - len(b.Partial)
	if len(s) <= room {
		b.Partial += s
		return
	}
	// Keep a few bytes past the limit, to see whether the character at the cut is whole.
	p := b.Partial + s[:min(len(s), room+utf8.UTFMax)]
	cut := MaxLine
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	b.Partial = p[:cut]
}
