package sandboxfs_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hangar-dev/hangar/sandboxhosts/sandboxfs"
)

// sandbox makes a root with its own /etc/passwd next to a host secret it must never reach.
func sandbox(t testing.TB) (*sandboxfs.Root, string, string) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	secret := filepath.Join(base, "secret")
	for _, d := range []string{"etc", "root", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, "etc/passwd"), "sandbox passwd")
	write(t, secret, "host secret")
	links := map[string]string{
		"root/abs":      "/etc/passwd",
		"root/up":       "../../../../../etc/passwd",
		"root/tosecret": "../../secret",
		"root/absdir":   "/",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := sandboxfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, root, secret
}

func write(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, r *sandboxfs.Root, p string) (string, error) {
	t.Helper()
	f, err := r.OpenFile(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

func TestPathsResolveInsideTheSandbox(t *testing.T) {
	r, _, _ := sandbox(t)
	cases := []struct{ path, want string }{
		{"/etc/passwd", "sandbox passwd"},
		{"//etc//passwd", "sandbox passwd"},
		{"/root/abs", "sandbox passwd"},
		{"/root/up", "sandbox passwd"},
		{"/root/absdir/etc/passwd", "sandbox passwd"},
	}
	for _, c := range cases {
		got, err := read(t, r, c.path)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.path, got, err, c.want)
		}
	}
}

func TestEscapesAreRefusedOrStayInside(t *testing.T) {
	r, _, _ := sandbox(t)
	for _, p := range []string{"../secret", "/../secret", "/root/../../secret", "etc/passwd", "", "/etc/\x00"} {
		if _, err := read(t, r, p); !errors.Is(err, sandboxfs.ErrBadPath) {
			t.Errorf("%q: %v, want ErrBadPath", p, err)
		}
	}
	// The link aims at the host's file; resolved in the root it names a file that is not there.
	if got, err := read(t, r, "/root/tosecret"); !os.IsNotExist(err) {
		t.Errorf("/root/tosecret: %q, %v; want not found", got, err)
	}
}

func TestUploadsReplaceAtomicallyAndKeepTheirMode(t *testing.T) {
	r, root, secret := sandbox(t)
	u, err := r.Create("/root/absdir/tmp/out.sh", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.WriteString("#!/bin/sh\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "tmp/out.sh")); !os.IsNotExist(err) {
		t.Fatalf("the file appeared before Commit: %v", err)
	}
	if err := u.Commit(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, "tmp/out.sh"))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("committed file: %v, %v", fi, err)
	}
	// Writing through a link that points at the host's file writes inside the sandbox.
	u, err = r.Create("/root/tosecret", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = u.WriteString("replaced")
	if err := u.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret" {
		t.Fatalf("the host's file changed: %q", b)
	}
	u, err = r.Create("/tmp/aborted", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	u.Abort()
	entries, _ := os.ReadDir(filepath.Join(root, "tmp"))
	if len(entries) != 1 {
		t.Fatalf("an aborted upload left files: %v", entries)
	}
	if _, err := r.Create("/nodir/x", 0o644); !os.IsNotExist(err) {
		t.Fatalf("missing parent: %v", err)
	}
}

func TestMkdirAllStaysInsideTheRoot(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	root, err := sandboxfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"/a/b/c", "/a/b/c"} {
		if err := root.MkdirAll(p, 0o755); err != nil {
			t.Fatalf("MkdirAll(%s): %v", p, err)
		}
	}
	// The absolute symlink resolves inside the root, where its target does not exist.
	if err := root.MkdirAll("/out/x/y", 0o755); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MkdirAll through a symlink pointing out = %v, want not exist", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "b", "c")); err != nil || !fi.IsDir() {
		t.Fatalf("a/b/c not made: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MkdirAll followed a symlink out of the root: %v", err)
	}
	if err := root.MkdirAll("/a/../b", 0o755); !errors.Is(err, sandboxfs.ErrBadPath) {
		t.Fatalf("MkdirAll with '..' = %v, want ErrBadPath", err)
	}
}
