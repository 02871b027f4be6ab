package tasks

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDeriveTitleTakesTheFirstLineOfThePrompt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct {
		name, prompt, want string
	}{
		{"first line", "Fix the flaky login test\nIt fails on CI.", "Fix the flaky login test"},
		{"blank lines skipped", "\n  \n\tRefactor billing  \n", "Refactor billing"},
		{"markdown heading dropped", "## Plan: move to Postgres\n- step", "Plan: move to Postgres"},
		{"quote marker dropped", "> why is this slow", "why is this slow"},
		{"inner whitespace collapsed", "a  \t b", "a b"},
		{"control characters dropped", "bell\a here", "bell here"},
		{"no prompt", "", ""},
		{"only blanks", " \n\t\n", ""},
		{"long line cut at a word with an ellipsis", long, strings.Repeat("word ", 15) + "word…"},
		{"one long word cut hard", strings.Repeat("x", 100), strings.Repeat("x", 79) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := deriveTitle(tc.prompt)
			if got != tc.want {
				t.Fatalf("deriveTitle(%q) = %q, want %q", tc.prompt, got, tc.want)
			}
			if n := utf8.RuneCountInString(got); n > maxDerivedTitleLen {
				t.Fatalf("title has %d characters, more than %d", n, maxDerivedTitleLen)
			}
		})
	}
}

func TestSlugIsLowercaseLettersDigitsAndDashes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		title, want string
	}{
		{"Fix the flaky login test", "fix-the-flaky-login-test"},
		{"  Ship v2.1 -- now!  ", "ship-v2-1-now"},
		{"OAuth/OIDC: callback_URL", "oauth-oidc-callback-url"},
		{"Déjà vu", "d-j-vu"},
		{"日本語", "task"},
		{"", "task"},
		{"Implement the authentication middleware for the API gateway", "implement-the-authentication-middleware"},
		{strings.Repeat("a", 50), strings.Repeat("a", 40)},
	} {
		if got := slug(tc.title); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.title, got, tc.want)
		}
	}
}

func TestNumberedNamesStayWithinTheLimit(t *testing.T) {
	t.Parallel()
	base := slug("Implement the authentication middleware for the API gateway")
	for _, tc := range []struct {
		base string
		n    int
		want string
	}{
		{"fix-login", 1, "fix-login"},
		{"fix-login", 2, "fix-login-2"},
		{"fix-login", 13, "fix-login-13"},
		{base, 2, "implement-the-authentication-2"},
		{strings.Repeat("a", 40), 10, strings.Repeat("a", 37) + "-10"},
	} {
		got := numbered(tc.base, tc.n)
		if got != tc.want || len(got) > maxNameLen {
			t.Errorf("numbered(%q, %d) = %q, want %q (at most %d characters)", tc.base, tc.n, got, tc.want, maxNameLen)
		}
	}
}

func TestSearchIndexHoldsWordsAndTheirPrefixes(t *testing.T) {
	t.Parallel()
	got := searchIndex("Fix OAuth", "an authentication-bug, a 2nd try: Ünïcode")
	want := []string{
		"fix", "oau", "oaut", "oauth", "an", "aut", "auth", "authe", "authen", "authent",
		"authenti", "authentic", "authentica", "authenticat", "authenticati", "authenticatio",
		"authentication", "bug", "2nd", "try", "ünï", "ünïc", "ünïco", "ünïcod", "ünïcode",
	}
	if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, slices.Sorted(slices.Values(want))) {
		t.Fatalf("searchIndex keys:\n got %v\nwant %v", g, slices.Sorted(slices.Values(want)))
	}
}

func TestSearchIndexCapsWordsAndKeyLength(t *testing.T) {
	t.Parallel()
	// Distinct words: aa, bb, …, zz, aaa, bbb, …; word i is letter i%26 repeated 2+i/26 times.
	word := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 2+i/26) }
	var prompt strings.Builder
	for i := range maxIndexedWords + 50 {
		prompt.WriteString(word(i) + " ")
	}
	index := searchIndex("supercalifragilisticexpialidocious", prompt.String())
	// The title's word counts first, so the prompt's word maxIndexedWords-2 is the last one in.
	if !index[word(maxIndexedWords-2)] || index[word(maxIndexedWords-1)] {
		t.Fatalf("want exactly the first %d words indexed", maxIndexedWords)
	}
	if !index["supercalifragili"] {
		t.Fatal("a long word is not indexed by its first 16 characters")
	}
	for key := range index {
		if n := utf8.RuneCountInString(key); n > maxKeyLen {
			t.Fatalf("key %q has %d characters, more than %d", key, n, maxKeyLen)
		}
	}
}

func TestSearchTermsAreDistinctIndexableWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		search string
		want   []string
	}{
		{"Login", []string{"login"}},
		{"  login PAGE login ", []string{"login", "page"}},
		{"a fix: b-c", []string{"fix"}},
		{"supercalifragilisticexpialidocious", []string{"supercalifragili"}},
		{"", nil},
		{"!!", nil},
	} {
		if got := searchTerms(tc.search); !slices.Equal(got, tc.want) {
			t.Errorf("searchTerms(%q) = %q, want %q", tc.search, got, tc.want)
		}
	}
}
