package tasks

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// maxTitleLen bounds a title a client sets, in characters.
	maxTitleLen = 200
	// maxDerivedTitleLen bounds a title derived from the prompt: a list row, not a paragraph.
	maxDerivedTitleLen = 80
	// maxNameLen bounds a local task name, suffix included: short enough for a path segment
	// or a branch name.
	maxNameLen = 40
	// fallbackName is the name of a task whose title has no letters or digits to name it by.
	fallbackName = "task"
)

// Bounds of the search index. Every word of at least minWordLen characters is indexed by its
// prefixes of minPrefixLen to maxKeyLen characters (a shorter word by itself), so a search word
// matches any word that starts with it; search words longer than maxKeyLen compare on their
// first maxKeyLen characters.
const (
	minWordLen      = 2
	minPrefixLen    = 3
	maxKeyLen       = 16
	maxIndexedWords = 200
	maxSearchWords  = 10
)

// deriveTitle makes a display title from a prompt: its first non-blank line, without markdown
// heading or quote markers, on one line, cut at a word boundary with "…" when too long.
func deriveTitle(prompt string) string {
	for line := range strings.Lines(prompt) {
		line = strings.Join(strings.Fields(strings.TrimLeft(line, "#> \t")), " ")
		line = strings.Map(dropControl, line)
		if line == "" {
			continue
		}
		if cut, short := truncate(line, maxDerivedTitleLen-1, ' '); short {
			return cut + "…"
		}
		return line
	}
	return ""
}

func dropControl(r rune) rune {
	if unicode.IsControl(r) {
		return -1
	}
	return r
}

// slug turns a title into a name: lowercase ASCII letters and digits, runs of anything else as
// one '-', at most maxNameLen characters, "task" when nothing is left.
func slug(title string) string {
	var b strings.Builder
	gap := false
	for _, r := range strings.ToLower(title) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if gap && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			gap = false
		} else {
			gap = true
		}
	}
	s, _ := truncate(b.String(), maxNameLen, '-')
	if s == "" {
		return fallbackName
	}
	return s
}

// numbered is the n-th candidate name for base: base itself, then base-2, base-3, …, with base
// shortened so the whole stays within maxNameLen.
func numbered(base string, n int) string {
	if n == 1 {
		return base
	}
	return tagged(base, strconv.Itoa(n))
}

// tagged is base with "-"+tag appended, within maxNameLen.
func tagged(base, tag string) string {
	head, _ := truncate(base, maxNameLen-len(tag)-1, '-')
	if head == "" {
		head = fallbackName
	}
	return head + "-" + tag
}

// truncate shortens s to at most n runes, backing up to the last sep when the cut would split a
// word, and reports whether it cut anything. Trailing seps are dropped.
func truncate(s string, n int, sep rune) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	r := []rune(s)
	cut := r[:n]
	if r[n] != sep {
		for i := len(cut) - 1; i > 0; i-- {
			if cut[i] == sep {
				cut = cut[:i]
				break
			}
		}
	}
	return strings.TrimRight(string(cut), string(sep)), true
}

// words splits s into lowercased runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// searchIndex is the token set stored on a task: the keys of the first maxIndexedWords distinct
// words of its title, then its prompt.
func searchIndex(title, prompt string) map[string]bool {
	index := make(map[string]bool)
	seen := make(map[string]bool)
	for _, w := range slices.Concat(words(title), words(prompt)) {
		if len(seen) == maxIndexedWords {
			break
		}
		r := []rune(w)
		if len(r) < minWordLen || seen[w] {
			continue
		}
		seen[w] = true
		if len(r) < minPrefixLen {
			index[w] = true
			continue
		}
		for n := minPrefixLen; n <= min(len(r), maxKeyLen); n++ {
			index[string(r[:n])] = true
		}
	}
	return index
}

// searchTerms are the index keys a search string must all match: its distinct words long enough
// to be indexed, cut to maxKeyLen.
func searchTerms(search string) []string {
	var out []string
	for _, w := range words(search) {
		r := []rune(w)
		if len(r) < minWordLen {
			continue
		}
		if len(r) > maxKeyLen {
			w = string(r[:maxKeyLen])
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}
