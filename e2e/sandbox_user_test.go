package e2e

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// userImageCases are images whose config names a user (or none), and what `id -u`, `id -g`,
// `$HOME` and `id -un` say in them.
var userImageCases = []struct {
	name, user, want string
}{
	{"a user by name", "builder", "1000 1000 /home/builder builder"},
	{"a uid and gid", "1000:1000", "1000 1000 /home/builder builder"},
	{"root when the image names none", "", "0 0 /root root"},
}

// pushUserImage pushes busybox with a builder user (1000) and the config's User set to user.
func pushUserImage(t *testing.T, s *sandboxStack, user string) string {
	t.Helper()
	base, err := images.Busybox(map[string]images.File{
		"/etc/passwd": {Content: []byte("root:x:0:0:root:/root:/bin/sh\nbuilder:x:1000:1000:builder:/home/builder:/bin/sh\n")},
		"/etc/group":  {Content: []byte("root:x:0:\nbuilder:x:1000:\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.User = user
	img, err := mutate.ConfigFile(base, cf)
	if err != nil {
		t.Fatal(err)
	}
	return imagestest.Push(t, s.sb.Registry, "test/user"+strings.ReplaceAll(user, ":", "-"), img)
}

func TestCommandsRunAsTheImagesUserWithAWritableHome(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	for _, tc := range userImageCases {
		t.Run(tc.name, func(t *testing.T) {
			id := s.create(t, &appv1.CreateSessionRequest{ImageUri: pushUserImage(t, s, tc.user)})
			got := s.sh(t, id, `echo "$(id -u) $(id -g) $HOME $(id -un)" $(touch "$HOME/f" && echo ok)`)
			if strings.TrimSpace(got) != tc.want+" ok" {
				t.Fatalf("got %q, want %q", got, tc.want+" ok")
			}
		})
	}
}

// The shell route runs its shell as the same user commands run as, in the same home, and what
// it creates belongs to that user.
func TestTheShellRunsAsTheImagesUser(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	for _, tc := range userImageCases {
		t.Run(tc.name, func(t *testing.T) {
			id := s.create(t, &appv1.CreateSessionRequest{ImageUri: pushUserImage(t, s, tc.user)})
			sh := s.openShell(t, id, nil)
			sh.typeLine(t, `echo "who=$(id -u) $(id -g) $HOME $(whoami)"`)
			sh.waitFor(t, "who="+tc.want)
			sh.typeLine(t, `touch "$HOME/from-shell" && echo "owner=$(stat -c '%u %g' "$HOME/from-shell")"`)
			uid, gid, _ := strings.Cut(tc.want, " ")
			sh.waitFor(t, "owner="+uid+" "+strings.Fields(gid)[0])
			// The owner as a command sees it, not only as the shell says.
			if got := strings.TrimSpace(s.sh(t, id, `stat -c '%u:%g' "$HOME/from-shell"`)); got != uid+":"+strings.Fields(gid)[0] {
				t.Errorf("the shell's file is owned by %s, want %s:%s", got, uid, strings.Fields(gid)[0])
			}
		})
	}
}
