package imagestest

import (
	"archive/tar"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hangar-dev/hangar/sandboxhosts/images"
)

// Trick is a layer crafted to write outside its layer directory, aimed at a
// host directory that must stay untouched.
type Trick struct {
	Name string
	// Refused: the cache must refuse the whole layer, with an error naming
	// Entry. Otherwise it must unpack the layer with the trick neutralised:
	// Inside exists in the layer dir (when set) and Missing does not.
	Refused bool
	Entry   string
	Inside  string
	Missing string
	Entries []images.TarEntry
}

// Tricks returns every trick, aimed at target, an absolute host directory.
// Besides target, the hardlink tricks aim at the host's /etc/passwd.
func Tricks(target string) []Trick {
	rel := strings.TrimPrefix(target, "/")
	up := strings.Repeat("../", 32)
	longPath := strings.Repeat("d/", 2100) + "f"
	return []Trick{
		{Name: "dotdot escape", Refused: true, Entry: up + rel + "/pwned",
			Entries: []images.TarEntry{File(up+rel+"/pwned", "pwned", 0o644)}},
		{Name: "dotdot after a dir", Refused: true, Entry: "a/" + up + rel + "/pwned",
			Entries: []images.TarEntry{File("a/"+up+rel+"/pwned", "pwned", 0o644)}},
		{Name: "absolute name lands inside the layer", Inside: rel + "/pwned",
			Entries: []images.TarEntry{File(target+"/pwned", "pwned", 0o644)}},
		{Name: "write through absolute symlink", Refused: true, Entry: "evil/pwned",
			Entries: []images.TarEntry{Symlink("evil", target), File("evil/pwned", "pwned", 0o644)}},
		{Name: "write through relative symlink", Refused: true, Entry: "evil/pwned",
			Entries: []images.TarEntry{Symlink("evil", strings.TrimSuffix(up, "/")+target), File("evil/pwned", "pwned", 0o644)}},
		{Name: "write through symlink to root", Refused: true, Entry: "evil/" + rel + "/pwned",
			Entries: []images.TarEntry{Symlink("evil", "/"), File("evil/"+rel+"/pwned", "pwned", 0o644)}},
		{Name: "dir swapped for symlink then write", Refused: true, Entry: "d/pwned",
			Entries: []images.TarEntry{Dir("d/", 0o755), Symlink("d", target), File("d/pwned", "pwned", 0o644)}},
		{Name: "file replaces symlink instead of following it", Inside: "x",
			Entries: []images.TarEntry{Symlink("x", target+"/pwned"), File("x", "pwned", 0o644)}},
		{Name: "hardlink to host file", Refused: true, Entry: "passwd",
			Entries: []images.TarEntry{Hardlink("passwd", "/etc/passwd")}},
		{Name: "hardlink with dotdot", Refused: true, Entry: "x",
			Entries: []images.TarEntry{Hardlink("x", "../../x")}},
		{Name: "hardlink to a later entry", Refused: true, Entry: "early",
			Entries: []images.TarEntry{Hardlink("early", "later"), File("later", "later", 0o644)}},
		{Name: "hardlink through symlink", Refused: true, Entry: "passwd",
			Entries: []images.TarEntry{Symlink("etc", "/etc"), Hardlink("passwd", "etc/passwd")}},
		{Name: "char device is not created", Missing: "mem",
			Entries: []images.TarEntry{Device("mem", tar.TypeChar, 1, 1)}},
		{Name: "block device is not created", Missing: "sda",
			Entries: []images.TarEntry{Device("sda", tar.TypeBlock, 8, 0)}},
		{Name: "whiteout of dot", Refused: true, Entry: "d/.wh..",
			Entries: []images.TarEntry{Dir("d/", 0o755), File("d/.wh..", "", 0o644)}},
		{Name: "name component too long", Refused: true, Entry: strings.Repeat("a", 300),
			Entries: []images.TarEntry{File(strings.Repeat("a", 300), "", 0o644)}},
		{Name: "path too long", Refused: true, Entry: longPath,
			Entries: []images.TarEntry{File(longPath, "", 0o644)}},
	}
}

// MaliciousLayer builds the trick's layer.
func MaliciousLayer(t testing.TB, tr Trick) v1.Layer {
	t.Helper()
	return Layer(t, tr.Entries...)
}
