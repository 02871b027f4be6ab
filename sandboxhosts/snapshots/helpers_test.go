package snapshots

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/testkit"
)

func requireRoot(tb testing.TB) {
	tb.Helper()
	testkit.RequireRoot(tb, "making whiteouts, trusted.overlay xattrs and foreign owners")
}

// testBucket opens a fileblob bucket in a temp dir and returns it with the dir behind it.
func testBucket(tb testing.TB) (*blob.Bucket, string) {
	tb.Helper()
	dir := tb.TempDir()
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b, dir
}

// smallChunks keeps test trees small while still cutting files into many chunks.
var smallChunks = Options{MinChunkSize: 16 << 10, AvgChunkSize: 64 << 10, MaxChunkSize: 256 << 10}

// node is everything a restore must reproduce about one path.
type node struct {
	Type             string
	Mode             uint32
	UID, GID         uint32
	Mtime            int64
	Size             int64
	SHA256           string
	Link             string // symlink target
	Rdev             uint64
	Xattrs           string
	HardlinkedWithAt string // first path sharing this inode, for nlink > 1
}

// walk describes a tree the way a restore must reproduce it, for whole-tree comparison.
func walk(tb testing.TB, dir string) map[string]node {
	tb.Helper()
	out := make(map[string]node)
	inodes := make(map[uint64]string)
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		n := node{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Mtime: st.Mtim.Nano(), Rdev: st.Rdev}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			n.Type = "dir"
		case unix.S_IFREG:
			n.Type, n.Size = "file", st.Size
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			n.SHA256 = hex.EncodeToString(sum[:])
		case unix.S_IFLNK:
			n.Type = "symlink"
			n.Link, _ = os.Readlink(p)
		default:
			n.Type = fmt.Sprintf("special %o", st.Mode&unix.S_IFMT)
		}
		whiteout := st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
		if n.Type != "dir" && !whiteout && st.Nlink > 1 {
			if first, ok := inodes[st.Ino]; ok {
				n.HardlinkedWithAt = first
			} else {
				inodes[st.Ino] = rel
			}
		}
		x, err := readXattrs(p)
		if err != nil {
			return err
		}
		var kv []string
		for k, v := range x {
			kv = append(kv, k+"="+string(v))
		}
		sort.Strings(kv)
		n.Xattrs = strings.Join(kv, ",")
		out[rel] = n
		return nil
	})
	if err != nil {
		tb.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

func assertSameTree(tb testing.TB, want, got map[string]node) {
	tb.Helper()
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			tb.Errorf("%q missing after restore", p)
			continue
		}
		if g != w {
			tb.Errorf("%q differs:\n want %+v\n got  %+v", p, w, g)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			tb.Errorf("%q appeared after restore", p)
		}
	}
}

func writeFile(tb testing.TB, p string, data []byte, mode os.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is filtered by the umask
		tb.Fatal(err)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// seededBytes is reproducible random data, for tests whose chunk boundaries must not vary.
func seededBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	mrand.NewChaCha8([32]byte{byte(seed)}).Read(b)
	return b
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// buildEveryType builds an upper dir holding one of everything overlayfs can leave behind.
func buildEveryType(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "empty"), nil, 0o644)
	writeFile(t, filepath.Join(dir, "one"), []byte("x"), 0o600)
	writeFile(t, filepath.Join(dir, "big", "random.bin"), randomBytes(5<<20), 0o644)
	writeFile(t, filepath.Join(dir, "bin", "setuid"), []byte("#!/bin/sh\n"), 0o4755)
	writeFile(t, filepath.Join(dir, "bin", "setgid"), []byte("#!/bin/sh\n"), 0o2711)
	writeFile(t, filepath.Join(dir, "odd names", "spaced file ü 日本.txt"), []byte("unicode"), 0o644)
	writeFile(t, filepath.Join(dir, "odd names", "bad\xffutf8"), []byte("raw bytes name"), 0o644)
	writeFile(t, filepath.Join(dir, "home", "user", "notes"), []byte("mine"), 0o640)
	must(t, os.Chown(filepath.Join(dir, "home", "user", "notes"), 1000, 1000))
	must(t, os.Chown(filepath.Join(dir, "home", "user"), 1000, 1000))
	must(t, os.Mkdir(filepath.Join(dir, "tmp"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "tmp"), 0o1777))
	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("one", filepath.Join(dir, "rel-link")))
	must(t, os.Symlink("does/not/exist", filepath.Join(dir, "dangling")))
	must(t, unix.Lchown(filepath.Join(dir, "rel-link"), 1000, 1000))
	must(t, os.Link(filepath.Join(dir, "one"), filepath.Join(dir, "hard-one")))
	must(t, os.Link(filepath.Join(dir, "one"), filepath.Join(dir, "home", "hard-one-too")))
	must(t, os.Link(filepath.Join(dir, "rel-link"), filepath.Join(dir, "hard-to-symlink")))
	must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o620))
	must(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(t, unix.Mknod(filepath.Join(dir, "etc", "deleted.conf"), unix.S_IFCHR, 0))
	must(t, unix.Mknod(filepath.Join(dir, "etc", "also-deleted"), unix.S_IFCHR, 0))
	must(t, os.MkdirAll(filepath.Join(dir, "opt", "replaced"), 0o755))
	must(t, unix.Setxattr(filepath.Join(dir, "opt", "replaced"), "trusted.overlay.opaque", []byte("y"), 0))
	writeFile(t, filepath.Join(dir, "opt", "replaced", "fresh"), []byte("new"), 0o644)
	must(t, unix.Setxattr(filepath.Join(dir, "one"), "user.origin", []byte("agent"), 0))
	must(t, unix.Setxattr(filepath.Join(dir, "fifo"), "trusted.overlay.test", []byte("\x00\x01bin"), 0))
	must(t, unix.Lsetxattr(filepath.Join(dir, "dangling"), "trusted.overlay.origin", []byte("fh"), 0))
	must(t, os.Mkdir(filepath.Join(dir, "locked"), 0o500))
	writeFile(t, filepath.Join(dir, "locked", "inside"), []byte("in a read-only dir"), 0o444)
	must(t, os.Chmod(filepath.Join(dir, "locked"), 0o500))
	must(t, os.Chmod(dir, 0o755))
	// Distinct old times, set last: creating entries bumps their parent's mtime.
	old := time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC)
	must(t, filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		old = old.Add(time.Minute + 7*time.Nanosecond)
		ts := []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
	}))
}
