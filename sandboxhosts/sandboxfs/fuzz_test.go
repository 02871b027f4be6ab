package sandboxfs_test

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/sandboxhosts/sandboxfs"
)

// FuzzClean: every path Clean accepts is relative, clean and free of "..", so it can only name
// something under the root it is resolved in.
func FuzzClean(f *testing.F) {
	for _, seed := range []string{"/", "/etc/passwd", "//etc//passwd", "/a/./b/", "../x", "/a/../b", "/..", "a", "", "/\x00", "/a/b/c/..d/...", strings.Repeat("/a", 3000)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := sandboxfs.Clean(p)
		if err != nil {
			return
		}
		if rel == "" || strings.HasPrefix(rel, "/") || path.Clean(rel) != rel || slices.Contains(strings.Split(rel, "/"), "..") {
			t.Fatalf("Clean(%q) = %q, which is not a clean relative path inside the root", p, rel)
		}
	})
}

// FuzzConfinement replays what a sandbox's user can do to the paths the host then opens: make
// links with any target, directories and files at any path, and read any path. Whatever the
// sequence, nothing is made beside the root, the host's secret next to it keeps its content,
// and no read returns it.
func FuzzConfinement(f *testing.F) {
	for _, seed := range []struct {
		op        uint8
		p, target string
	}{
		{0, "/etc/passwd", ""}, {0, "/root/tosecret", ""}, {0, "/root/up", ""},
		{1, "/root/l", "../../secret"}, {1, "/root/l", "/proc/self/root/etc/passwd"}, {1, "/tmp/d", "/../../"},
		{2, "/root/absdir/newdir/x", ""}, {2, "/root/up/../x", ""}, {3, "/root/tosecret", ""}, {3, "/root/absdir/made", ""},
		{3, "/tmp/d/escape", ""}, {1, "/etc", "/"},
	} {
		f.Add(seed.op, seed.p, seed.target)
	}
	r, root, secret := sandbox(f)
	base := filepath.Dir(root)
	f.Fuzz(func(t *testing.T, op uint8, p, target string) {
		switch op % 4 {
		case 0:
			if got, err := read(t, r, p); err == nil && got == "host secret" {
				t.Fatalf("reading %q returned the host's secret", p)
			}
		case 1:
			_ = r.Symlink(target, p)
		case 2:
			_ = r.MkdirAll(p, 0o755)
		case 3:
			if u, err := r.Create(p, 0o644); err == nil {
				_, _ = u.WriteString("from the sandbox")
				_ = u.Commit()
			}
		}
		entries, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 {
			t.Fatalf("after op %d on %q (target %q), beside the root: %v", op%4, p, target, entries)
		}
		if b, err := os.ReadFile(secret); err != nil || string(b) != "host secret" {
			t.Fatalf("after op %d on %q (target %q), the host's secret holds %q, %v", op%4, p, target, b, err)
		}
	})
}
