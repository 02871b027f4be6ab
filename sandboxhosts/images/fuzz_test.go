package images

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// tarOf builds a layer's tar stream from spec, one entry a line: "<kind> <name> [<target>]",
// where kind is f (file), d (dir), l (symlink to target), h (hardlink to target), c or b (a
// device), or x (raw bytes, target, appended as a broken entry). The fuzzer mutates entries
// rather than tar bytes, whose header checksums would refuse almost every mutation.
func tarOf(spec string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for line := range strings.Lines(spec) {
		fields := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		if len(fields) < 2 {
			continue
		}
		hdr := &tar.Header{Name: fields[1], Mode: 0o644}
		target := ""
		if len(fields) == 3 {
			target = fields[2]
		}
		var body []byte
		switch fields[0] {
		case "f":
			hdr.Typeflag, body = tar.TypeReg, []byte(target)
			hdr.Size = int64(len(body))
		case "d":
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		case "l":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case "h":
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, target
		case "c", "b":
			hdr.Typeflag, hdr.Devmajor, hdr.Devminor = tar.TypeChar, 1, 3
			if fields[0] == "b" {
				hdr.Typeflag = tar.TypeBlock
			}
		case "x":
			tw.Flush()
			buf.WriteString(target)
			return buf.Bytes()
		default:
			continue
		}
		if tw.WriteHeader(hdr) != nil {
			continue
		}
		tw.Write(body)
	}
	tw.Close()
	return buf.Bytes()
}

// FuzzUnpackTar replays image layers crafted to escape their layer directory — by "..", absolute
// names, symlinks and hardlinks to the host, device nodes, whiteouts — in any order and mix:
// whatever the layer holds, unpacking it writes nothing beside the layer directory and changes
// no host file, and it answers an error or the entries it skipped, never a panic.
func FuzzUnpackTar(f *testing.F) {
	testkit.RequireRoot(f, "unpacking layers (chown, mknod, trusted.* xattrs)")
	up := strings.Repeat("../", 16)
	for _, seed := range []string{
		"d etc/\nf etc/hostname box\nl bin/sh busybox\nf bin/busybox x",
		"f " + up + "OUTSIDE/pwned pwned",
		"f a/" + up + "OUTSIDE/pwned pwned",
		"f /OUTSIDE/pwned pwned",
		"l evil /OUTSIDE\nf evil/pwned pwned",
		"l evil " + up + "OUTSIDE\nf evil/pwned pwned",
		"l evil /\nf evil/OUTSIDE/pwned pwned",
		"d d/\nl d /OUTSIDE\nf d/pwned pwned",
		"l x /OUTSIDE/pwned\nf x pwned",
		"h passwd /etc/passwd",
		"h x ../../x",
		"h early later\nf later later",
		"l etc /etc\nh passwd etc/passwd",
		"c mem\nb sda",
		"d d/\nf d/.wh..",
		"d d/\nf d/.wh..wh..opq\nf d/.wh.gone",
		"f " + strings.Repeat("a", 300) + " long",
		"f ok fine\nx broken \x00\x01garbage",
	} {
		f.Add(seed)
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		base := t.TempDir()
		outside, layer := filepath.Join(base, "outside"), filepath.Join(base, "layer")
		for _, d := range []string{outside, layer} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		// OUTSIDE in an entry names the host directory beside the layer.
		_, _ = unpackTar(bytes.NewReader(tarOf(strings.ReplaceAll(spec, "OUTSIDE", strings.TrimPrefix(outside, "/")))), layer, nil)
		if entries, err := os.ReadDir(base); err != nil || len(entries) != 2 {
			t.Fatalf("beside the layer after unpacking %q: %v, %v", spec, entries, err)
		}
		if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
			t.Fatalf("the host directory after unpacking %q: %v, %v", spec, entries, err)
		}
		if now, err := os.ReadFile("/etc/passwd"); err != nil || !bytes.Equal(now, passwd) {
			t.Fatalf("unpacking %q changed the host's /etc/passwd", spec)
		}
	})
}

// FuzzParseRemotes feeds .git/config files as an image's author may write them, since
// FindRepos reads them from pulled images: the parser answers remotes or an error, never a
// panic, and every remote it answers has a name and a URL.
func FuzzParseRemotes(f *testing.F) {
	for _, seed := range []string{
		"[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://github.com/acme/widgets.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
		"[remote \"a\\\"b\"]\nurl = \"git@github.com:acme/x.git\" ; comment\n",
		"\xef\xbb\xbf[remote \"o\"]\n  URL=ssh://h/x \\\n  continued\n",
		"[remote.origin]\nurl = x\n", "[remote \"o\"\nurl=x", "[remote \"o\"]\nurl", "# only a comment", "[", "[remote \"\"]\nurl = y\n",
		"[remote \"o\"]\nurl = \"unterminated\n", "[remote \"o\"]\nurl = a\\tb\\nc\\\"d\\\\\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		remotes, err := parseRemotes(data)
		if err != nil {
			return
		}
		for _, r := range remotes {
			if r.Name == "" && r.URL == "" {
				t.Fatalf("parseRemotes(%q) answered an empty remote: %+v", data, remotes)
			}
		}
	})
}
