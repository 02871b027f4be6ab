package host

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hangar-dev/hangar/sandboxhosts/sandboxfs"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// runAs is the user an image says its commands run as (its config's User), with the home
// directory and name its /etc/passwd gives; nil for root or an image that names none.
type runAs struct {
	user       supervisor.User
	name, home string
}

// imageUser resolves an image's User ("name", "uid", "name:group", "uid:gid") against the
// /etc/passwd and /etc/group of its layers (topmost first). A numeric uid the passwd file lacks
// runs with its own number as gid (unless one is given) and /tmp as home.
func imageUser(spec string, lowerDirs []string) (*runAs, error) {
	spec = strings.TrimSpace(spec)
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if userPart == "" || userPart == "root" || userPart == "0" && (!hasGroup || groupPart == "0" || groupPart == "root") {
		return nil, nil
	}
	passwd := imageFile(lowerDirs, "etc/passwd")
	r := &runAs{home: "/tmp"}
	found := false
	for _, f := range lines(passwd) {
		// name:x:uid:gid:gecos:home:shell
		if len(f) < 7 || f[0] != userPart && f[2] != userPart {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		r.user, r.name, r.home, found = supervisor.User{UID: uint32(uid), GID: uint32(gid)}, f[0], f[5], true
		break
	}
	if !found {
		uid, err := strconv.ParseUint(userPart, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("the image's user %q is not in its /etc/passwd", userPart)
		}
		r.user = supervisor.User{UID: uint32(uid), GID: uint32(uid)}
	}
	if hasGroup {
		gid, err := strconv.ParseUint(groupPart, 10, 32)
		if err != nil {
			gid, err = groupID(imageFile(lowerDirs, "etc/group"), groupPart)
			if err != nil {
				return nil, err
			}
		}
		r.user.GID = uint32(gid)
	}
	if r.home == "" || r.home == "/" || r.home == "/nonexistent" {
		r.home = "/tmp"
	}
	return r, nil
}

// groupID is the gid of the group called name in an /etc/group file.
func groupID(group []byte, name string) (uint64, error) {
	for _, f := range lines(group) {
		if len(f) >= 3 && f[0] == name {
			return strconv.ParseUint(f[2], 10, 32)
		}
	}
	return 0, fmt.Errorf("the image's group %q is not in its /etc/group", name)
}

// lines splits a colon-separated file into the fields of its lines.
func lines(b []byte) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, strings.Split(l, ":"))
		}
	}
	return out
}

// imageFile is the regular file rel of the topmost layer that has it.
func imageFile(lowerDirs []string, rel string) []byte {
	for _, dir := range lowerDirs {
		p := filepath.Join(dir, rel)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			return b
		}
	}
	return nil
}

// prepareHome makes the user's home directory in the sandbox and gives it to the user.
func (u *runAs) prepareHome(root *sandboxfs.Root) error {
	if u.home == "/tmp" {
		return nil
	}
	if err := root.MkdirAll(u.home, 0o755); err != nil {
		return fmt.Errorf("home of %s: %w", u.name, err)
	}
	return root.Lchown(u.home, int(u.user.UID), int(u.user.GID))
}

// env is the user's HOME and USER, under the session's own variables.
func (u *runAs) env() map[string]string {
	if u == nil {
		return nil
	}
	env := map[string]string{"HOME": u.home}
	if u.name != "" {
		env["USER"], env["LOGNAME"] = u.name, u.name
	}
	return env
}

// chown gives a file the host placed in the sandbox to the user commands run as.
func (u *runAs) chown(root *sandboxfs.Root, p string) error {
	if u == nil {
		return nil
	}
	return root.Lchown(p, int(u.user.UID), int(u.user.GID))
}

// chownDirs gives the user the directories from dir up to its home (exclusive): the ones a
// placed file's MkdirAll may have made, so that the user can write beside the file.
func (u *runAs) chownDirs(root *sandboxfs.Root, dir string) error {
	if u == nil {
		return nil
	}
	for p := path.Clean(dir); strings.HasPrefix(p, u.home+"/"); p = path.Dir(p) {
		if err := u.chown(root, p); err != nil {
			return err
		}
	}
	return nil
}

// identity is what an exec runs as: nil for root.
func (u *runAs) identity() *supervisor.User {
	if u == nil {
		return nil
	}
	user := u.user
	return &user
}
