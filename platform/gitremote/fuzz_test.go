package gitremote

import (
	"strings"
	"testing"
)

// FuzzParseRemote feeds git remote URLs as profile authors paste them: ParseRemote answers an
// error or a remote with a lowercase host and an owner and name free of empty, "." and ".."
// segments.
func FuzzParseRemote(f *testing.F) {
	for _, seed := range []string{
		"https://github.com/acme/widgets.git", "git@github.com:acme/widgets.git", "ssh://git@GitHub.com:22/acme/widgets",
		"git://example.org/group/sub/project/", "http://user:pw@host:8080/a/b", "file:///srv/repo.git", "/srv/repo",
		"C:/repos/x", "host:a/../b", "https://h/a//b", "https://[::1]:22/a/b", "https://h/%2e%2e/b", "ftp://h/a/b", " ",
		"https://h:notaport/a/b", "a@b@host:o/n", "https://xn--n3h.example/a/b", "https://host/a/b.git.git",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := ParseRemote(raw)
		if err != nil {
			return
		}
		if r.GetHost() == "" || r.GetHost() != strings.ToLower(r.GetHost()) || r.GetName() == "" || r.GetOwner() == "" {
			t.Fatalf("ParseRemote(%q) = %v", raw, r)
		}
		for _, seg := range strings.Split(r.GetOwner()+"/"+r.GetName(), "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("ParseRemote(%q) = %v, with segment %q", raw, r, seg)
			}
		}
	})
}
