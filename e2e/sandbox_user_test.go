package e2e

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

func TestCommandsRunAsTheImagesUserWithAWritableHome(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	base, err := images.Busybox(map[string]images.File{
		"/etc/passwd": {Content: []byte("root:x:0:0:root:/root:/bin/sh\nbuilder:x:1000:1000:builder:/home/builder:/bin/sh\n")},
		"/etc/group":  {Content: []byte("root:x:0:\nbuilder:x:1000:\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user, want string
	}{
		{"a user by name", "builder", "1000 1000 /home/builder builder ok"},
		{"a uid and gid", "1000:1000", "1000 1000 /home/builder builder ok"},
		{"root when the image names none", "", "0 0 /root root ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cf, err := base.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			cf.Config.User = tc.user
			img, err := mutate.ConfigFile(base, cf)
			if err != nil {
				t.Fatal(err)
			}
			ref := imagestest.Push(t, s.sb.Registry, "test/user"+strings.ReplaceAll(tc.user, ":", "-"), img)
			id := s.create(t, &appv1.CreateSessionRequest{ImageUri: ref})
			got := s.sh(t, id, `echo "$(id -u) $(id -g) $HOME $(id -un)" $(touch "$HOME/f" && echo ok)`)
			if strings.TrimSpace(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
