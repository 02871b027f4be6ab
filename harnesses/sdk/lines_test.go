package sdk

import (
	"reflect"
	"strings"
	"testing"
)

// feed runs output through a LineBuffer in chunks of size n and returns every line, the
// unfinished one last.
func feed(output string, n int) []string {
	var b LineBuffer
	var lines []string
	for len(output) > 0 {
		k := min(n, len(output))
		lines = append(lines, b.Feed(output[:k])...)
		output = output[k:]
	}
	if last, ok := b.Flush(); ok {
		lines = append(lines, last)
	}
	return lines
}

func TestLineBufferDoesNotDependOnChunking(t *testing.T) {
	tests := []struct {
		name   string
		output string
		want   []string
	}{
		{name: "lines", output: "a\nbc\n", want: []string{"a", "bc"}},
		{name: "unfinished last line", output: "a\nbc", want: []string{"a", "bc"}},
		{name: "crlf", output: "a\r\nb\r\n", want: []string{"a", "b"}},
		{name: "empty lines kept", output: "\n\na\n", want: []string{"", "", "a"}},
		{name: "utf-8 split anywhere", output: "héllo wörld\n", want: []string{"héllo wörld"}},
		{name: "nothing", output: "", want: nil},
	}
	for _, tt := range tests {
		for _, n := range []int{1, 2, 3, 1 << 20} {
			if got := feed(tt.output, n); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s in chunks of %d: %q, want %q", tt.name, n, got, tt.want)
			}
		}
	}
}

func TestLineBufferCutsOverlongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLine+10)
	got := feed(long+"\nnext\n", 1<<20)
	if len(got) != 2 || len(got[0]) != MaxLine || got[1] != "next" {
		t.Fatalf("got %d lines, first %d bytes; want the first cut to %d and the next intact", len(got), len(got[0]), MaxLine)
	}
}

func TestLineBufferCutsAtACharacter(t *testing.T) {
	long := strings.Repeat("x", MaxLine-1) + "é"
	got := feed(long+"\n", 1<<20)
	if len(got) != 1 || got[0] != long[:MaxLine-1] {
		t.Fatalf("got a line of %d bytes ending %q, want the é dropped whole", len(got[0]), got[0][len(got[0])-2:])
	}
}
