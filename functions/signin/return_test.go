package signin

import (
	"net/url"
	"strings"
	"testing"
)

// browserReads is a Location as Chromium reads it before resolving it (the WHATWG URL parser):
// leading and trailing C0 controls and spaces trimmed, tabs, CR and LF removed anywhere, and
// backslashes taken as slashes (as in every http(s) URL).
func browserReads(loc string) string {
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	return strings.NewReplacer("\t", "", "\r", "", "\n", "", "\\", "/").Replace(loc)
}

// staysOn reports whether loc, resolved against base, names base's host (and scheme).
func staysOn(base *url.URL, loc string) bool {
	u, err := url.Parse(loc)
	if err != nil {
		return false
	}
	r := base.ResolveReference(u)
	return r.Scheme == base.Scheme && r.Host == base.Host
}

var hangarBase, _ = url.Parse("https://hangar.example")

// return_to crafted to leave Hangar after sign-in: each of these is, as a browser reads it, a
// URL on another host, so it becomes "/"; paths on Hangar pass, in the form the browser reads.
func TestSecuritySafeReturnKeepsTheBrowserOnHangar(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/sessions?x=1", "/sessions?x=1"},
		{"/tasks/task_1#top", "/tasks/task_1#top"},
		{"/", "/"},
		{"", "/"},
		{"sessions", "/"},
		{"https://evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"//evil.example", "/"},
		{"/\\evil.example", "/"},
		{"\\\\evil.example", "/"},
		{"/\t/evil.example", "/"},
		{"\t//evil.example", "/"},
		{"/\r\n/evil.example", "/"},
		{"/\\\t\\evil.example", "/"},
		{" //evil.example", "/"},
		{"\x00//evil.example", "/"},
		{"/\x01/evil.example", "/"},
		{"/%zz", "/"},
		{"/a\\b", "/a/b"},
		{"/a\tb", "/ab"},
		{"/%2F/evil.example", "/%2F/evil.example"},
	} {
		got := safeReturn(c.in)
		if got != c.want {
			t.Errorf("safeReturn(%q) = %q, want %q", c.in, got, c.want)
		}
		if !staysOn(hangarBase, got) || !staysOn(hangarBase, browserReads(got)) {
			t.Errorf("safeReturn(%q) = %q leaves %s", c.in, got, hangarBase)
		}
	}
}

// FuzzSafeReturn holds safeReturn's invariant for any input: what it answers, read by net/url
// and as a browser reads it, is a place on Hangar's own host.
func FuzzSafeReturn(f *testing.F) {
	for _, s := range []string{"/sessions", "//evil.example", "/\t/evil.example", "/\\evil", "https://x", "/%09/x", " /\\/x", "/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := safeReturn(in)
		if !staysOn(hangarBase, got) {
			t.Fatalf("safeReturn(%q) = %q: net/url resolves it off %s", in, got, hangarBase.Host)
		}
		if !staysOn(hangarBase, browserReads(got)) {
			t.Fatalf("safeReturn(%q) = %q: a browser resolves it off %s", in, got, hangarBase.Host)
		}
	})
}
