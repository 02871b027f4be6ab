package harness

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// MaxCarry bounds the unfinished line a Carry holds: past it, the line is handed on in pieces,
// as output without newlines must still reach the plugin. Lines up to it reach the plugin
// whole and clipped, however long their strings were.
const MaxCarry = 32 << 20

// Carry cuts one stream of a harness's output into the chunks the host hands a plugin's Parse
// (abi's "Output in whole lines, and raw"): whole lines, the unfinished last line of each piece
// of output carried to the next, and the JSON strings of a line longer than abi.MaxString
// clipped (abi.ClipStrings). Plugins split their output into lines (the SDK's LineBuffer); a
// line they get whole costs them one call, while a line spread over many calls would travel,
// growing, in their State through every one of them; and a string of megabytes (a tool's
// output) costs the host a search for quotes where the plugin, as WebAssembly, would take
// seconds to decode it. A line longer than MaxCarry is handed on as it comes, never inside a
// UTF-8 character, which a request's JSON string cannot carry.
type Carry struct{ buf []byte }

// Next returns the chunk to parse now that data arrived: what was carried and data up to its
// last newline (nothing when there is none yet).
func (c *Carry) Next(data []byte) []byte {
	i := bytes.LastIndexByte(data, '\n')
	if i < 0 {
		c.buf = append(c.buf, data...)
		if len(c.buf) <= MaxCarry {
			return nil
		}
		n := completeRunes(c.buf)
		chunk := c.buf[:n:n]
		c.buf = bytes.Clone(c.buf[n:])
		return clipLines(chunk)
	}
	chunk := data[:i+1]
	if len(c.buf) > 0 {
		chunk = append(c.buf, chunk...)
	}
	c.buf = bytes.Clone(data[i+1:])
	return clipLines(chunk)
}

// Rest returns what was carried when the stream ended, and empties the Carry.
func (c *Carry) Rest() []byte {
	rest := c.buf
	c.buf = nil
	return clipLines(rest)
}

// clipLines is chunk with the strings of its long lines clipped.
func clipLines(chunk []byte) []byte {
	if len(chunk) <= abi.MaxString {
		return chunk
	}
	var b bytes.Buffer
	for line := range strings.Lines(string(chunk)) {
		b.WriteString(abi.ClipStrings(line, abi.MaxString))
	}
	return b.Bytes()
}

// completeRunes is the length of the longest prefix of b that does not end inside a UTF-8
// character.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
