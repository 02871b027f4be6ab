package abi

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestClipStrings(t *testing.T) {
	// With max 40, a string longer than 40 bytes keeps its first 8 (40 less room for the note).
	const max = 40
	tail := strings.Repeat("z", 40)
	long := "abababababab" + tail // 52 bytes
	tests := []struct {
		name, line, want string
	}{
		{name: "a short line is kept", line: `{"a":"abc"}`, want: `{"a":"abc"}`},
		{name: "short strings are kept", line: `{"a":"` + tail[:39] + `","b":["de","` + tail + `"]}`, want: `{"a":"` + tail[:39] + `","b":["de","` + tail + `"]}`},
		{name: "a long string is cut and says so", line: `{"a":"` + long + `","b":"x"}`, want: `{"a":"abababab… [44 bytes clipped]","b":"x"}`},
		{name: "escaped quotes do not end a string", line: `{"a":"\"\"\"\"` + tail + `","b":1}`, want: `{"a":"\"\"\"\"… [40 bytes clipped]","b":1}`},
		{name: "an escaped backslash before the end does not hide it", line: `{"a":"xx\\","b":"` + long + `"}`, want: `{"a":"xx\\","b":"abababab… [44 bytes clipped]"}`},
		{name: "no cut inside an escape", line: `{"a":"xxxxx\u00e9` + tail + `"}`, want: `{"a":"xxxxx… [46 bytes clipped]"}`},
		{name: "no cut inside a two-byte escape", line: `{"a":"xxxxxxx\n` + tail + `"}`, want: `{"a":"xxxxxxx… [42 bytes clipped]"}`},
		{name: "no cut inside a character", line: `{"a":"xxxxxxxé` + tail + `"}`, want: `{"a":"xxxxxxx… [42 bytes clipped]"}`},
		{name: "an unterminated string is cut too", line: `{"a":"` + long, want: `{"a":"abababab… [44 bytes clipped]`},
		{name: "a long key is cut like a value", line: `{"` + long + `":1}`, want: `{"abababab… [44 bytes clipped]":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClipStrings(tt.line, max)
			if got != tt.want {
				t.Fatalf("ClipStrings(%q, %d)\n = %q\nwant %q", tt.line, max, got, tt.want)
			}
			if json.Valid([]byte(tt.line)) && !json.Valid([]byte(got)) {
				t.Fatalf("valid JSON became invalid: %q", got)
			}
			if again := ClipStrings(got, max); again != got {
				t.Fatalf("clipping again changed %q to %q", got, again)
			}
		})
	}
}

func FuzzClipStringsKeepsJSONValid(f *testing.F) {
	f.Add(`{"a":"\"\\\u00e9é\n","b":["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]}`, 40)
	f.Fuzz(func(t *testing.T, line string, max int) {
		if max < 1 || max > 1<<10 || !json.Valid([]byte(line)) {
			return
		}
		got := ClipStrings(line, max)
		if !json.Valid([]byte(got)) {
			t.Fatalf("ClipStrings(%q, %d) = %q, not JSON", line, max, got)
		}
		if again := ClipStrings(got, max); again != got {
			t.Fatalf("clipping %q again gave %q", got, again)
		}
	})
}
