package gitremote

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func TestParseRemoteAcceptsNetworkForms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw          string
		host, owner, label string
	}{
		{"https", "https://github.com/hangar-dev/hangar", "github.com", "hangar-dev", "hangar"},
		{"https with .git", "https://github.com/hangar-dev/hangar.git", "github.com", "hangar-dev", "hangar"},
		{"trailing slash after .git", "https://github.com/hangar-dev/hangar.git/", "github.com", "hangar-dev", "hangar"},
		{"trailing slash", "https://github.com/hangar-dev/hangar/", "github.com", "hangar-dev", "hangar"},
		{"host lowercased", "https://GitHub.COM/Hangar-Dev/Hangar", "github.com", "Hangar-Dev", "Hangar"},
		{"http with port", "http://git.example.com:8080/team/app", "git.example.com", "team", "app"},
		{"user info dropped", "https://ada@bitbucket.org/team/repo.git", "bitbucket.org", "team", "repo"},
		{"ssh with port", "ssh://git@gitlab.example.com:2222/team/app.git", "gitlab.example.com", "team", "app"},
		{"ssh to IPv6", "ssh://git@[2001:DB8::1]:22/team/app", "2001:db8::1", "team", "app"},
		{"git protocol", "git://git.kernel.org/pub/scm/git/git.git", "git.kernel.org", "pub/scm/git", "git"},
		{"scp-like", "git@github.com:hangar-dev/hangar.git", "github.com", "hangar-dev", "hangar"},
		{"scp-like without user", "github.com:hangar-dev/hangar", "github.com", "hangar-dev", "hangar"},
		{"scp-like with absolute path", "git@git.example.com:/srv/team/app.git", "git.example.com", "srv/team", "app"},
		{"nested groups", "https://gitlab.com/group/sub/proj", "gitlab.com", "group/sub", "proj"},
		{"nested groups scp-like", "git@gitlab.com:group/sub/deeper/proj.git", "gitlab.com", "group/sub/deeper", "proj"},
		{"surrounding spaces", "  git@github.com:o/r  ", "github.com", "o", "r"},
		{"https at a ref", "https://github.com/hangar-dev/hangar.git#release/1.2", "github.com", "hangar-dev", "hangar"},
		{"scp-like at a ref", "git@github.com:hangar-dev/hangar.git#v1.0.0", "github.com", "hangar-dev", "hangar"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRemote(tc.raw)
			if err != nil {
				t.Fatalf("ParseRemote(%q): %v", tc.raw, err)
			}
			want := &appv1.ProfileRepoRemote{Host: tc.host, Owner: tc.owner, Name: tc.label}
			if !proto.Equal(got, want) {
				t.Fatalf("ParseRemote(%q) = %v, want %v", tc.raw, got, want)
			}
		})
	}
}

func TestParseRemoteRejectsWhatNamesNoNetworkRepo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw, wantErr string
	}{
		{"empty", "   ", "is empty"},
		{"absolute local path", "/srv/git/app.git", "local path"},
		{"relative local path", "./app", "local path"},
		{"parent local path", "../app", "local path"},
		{"home local path", "~/src/app", "local path"},
		{"bare word", "app", "local path"},
		{"host without scheme or colon", "github.com/o/r", "local path"},
		{"windows drive", `C:\src\app`, "local path"},
		{"windows drive with slash", "C:/src/app", "local path"},
		{"file URL", "file:///srv/git/app.git", "file://"},
		{"unsupported scheme", "ftp://example.com/o/r", `scheme "ftp"`},
		{"no owner", "https://github.com/hangar", "owner and a repository"},
		{"no path", "https://github.com/", "owner and a repository"},
		{"scp-like without owner", "git@github.com:hangar.git", "owner and a repository"},
		{"only .git as name", "https://github.com/o/.git", "empty"},
		{"empty segment", "https://github.com/o//r", "empty"},
		{"dot-dot segment", "https://github.com/o/../r", `".."`},
		{"no host", "https:///o/r", "no host"},
		{"invalid host", "https://bad_host/o/r", "invalid host"},
		{"bad port", "https://github.com:http/o/r", "not a valid URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRemote(tc.raw)
			if err == nil {
				t.Fatalf("ParseRemote(%q) = %v, want an error", tc.raw, got)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseRemote(%q) error %q, want it to mention %q", tc.raw, err, tc.wantErr)
			}
		})
	}
}

func TestSplitRefNamesTheBranchOrTagAfterTheHash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, remote, ref string }{
		{"https://github.com/o/r.git", "https://github.com/o/r.git", ""},
		{"https://github.com/o/r.git#release/1.2", "https://github.com/o/r.git", "release/1.2"},
		{"git@github.com:o/r.git#v1.0.0", "git@github.com:o/r.git", "v1.0.0"},
	} {
		if remote, ref, _ := SplitRef(tc.raw); remote != tc.remote || ref != tc.ref {
			t.Errorf("SplitRef(%q) = %q, %q; want %q, %q", tc.raw, remote, ref, tc.remote, tc.ref)
		}
	}
}
