package abi

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxString bounds the JSON strings of a line of output a parser reads: the host clips every
// longer string of a line to MaxString bytes (ClipStrings) before it hands the line on (see
// "Output in whole lines, and raw"), and the SDK does the same for any host. So a line of JSON
// holding a tool result of megabytes is read as one holding its first 64 KiB. Events carry no
// more than that anyway (a session event holds at most 512 KiB), and a plugin, which runs as
// WebAssembly under a CPU deadline, decodes a line far more slowly than the host.
const MaxString = 64 << 10

// ClipStrings returns the line of JSON with every string longer than max bytes (as written,
// escapes included) cut to at most max bytes, never inside an escape or a UTF-8 character, and
// ended with a note of how many bytes were dropped; so clipping twice is clipping once. A line
// that is not JSON is cut the same way wherever it looks like a string; a line without a string
// that long comes back as it is. It only searches for quotes, so it is cheap on long lines.
func ClipStrings(line string, max int) string {
	if len(line) <= max || max <= clipNoteRoom {
		return line
	}
	var b strings.Builder
	last := 0 // line[:last] is in b
	for i := 0; ; {
		q := strings.IndexByte(line[i:], '"')
		if q < 0 {
			break
		}
		start := i + q + 1
		end := stringEnd(line, start)
		if end-start > max {
			cut := safeCut(line, start, start+max-clipNoteRoom)
			if b.Len() == 0 {
				b.Grow(min(len(line), 4*max))
			}
			b.WriteString(line[last:cut])
			b.WriteString(clipNote(end - cut))
			last = end
		}
		if end >= len(line) {
			break
		}
		i = end + 1
	}
	if last == 0 {
		return line
	}
	b.WriteString(line[last:])
	return b.String()
}

// clipNoteRoom is room enough for the note clipNote ends a clipped string with.
const clipNoteRoom = 32

func clipNote(dropped int) string { return "… [" + strconv.Itoa(dropped) + " bytes clipped]" }

// stringEnd is the index of the quote that ends the JSON string whose content starts at start:
// the first one not escaped by an odd run of backslashes, or len(s) when there is none.
func stringEnd(s string, start int) int {
	for k := start; ; {
		j := strings.IndexByte(s[k:], '"')
		if j < 0 {
			return len(s)
		}
		p := k + j
		n := 0
		for p-n-1 >= start && s[p-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return p
		}
		k = p + 1
	}
}

// safeCut moves cut, an index inside the string content s[start:], back so that s[start:cut]
// ends neither inside an escape sequence nor inside a UTF-8 character.
func safeCut(s string, start, cut int) int {
	// An escape is at most 6 bytes (\uXXXX): look for one that starts before cut and ends after.
	for r := cut - 1; r >= max(start, cut-5); r-- {
		if s[r] != '\\' {
			continue
		}
		n := 0 // backslashes before r
		for r-n-1 >= start && s[r-n-1] == '\\' {
			n++
		}
		if n%2 == 1 {
			continue // s[r] is escaped itself
		}
		size := 2
		if r+1 < len(s) && s[r+1] == 'u' {
			size = 6
		}
		if r+size > cut {
			cut = r
		}
		break
	}
	for cut > start && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return cut
}
