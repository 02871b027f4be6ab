package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BusyboxPath is the static busybox binary Busybox puts into the image.
const BusyboxPath = "/bin/busybox"

// BusyboxApplets are the applets Busybox links in /bin (symlinks to busybox).
var BusyboxApplets = []string{
	"[", "basename", "cat", "chmod", "cp", "date", "dd", "df", "dirname", "du",
	"echo", "env", "false", "find", "grep", "gzip", "head", "hostname", "id",
	"ifconfig", "ip", "kill", "ln", "ls", "mkdir", "mount", "mv", "nproc",
	"ping", "printf", "ps", "pwd", "readlink", "rm", "sed", "seq", "sh",
	"sha256sum", "sleep", "sort", "stat", "tail", "tar", "tee", "test",
	"timeout", "touch", "tr", "true", "uname", "uniq", "wc", "wget", "which",
	"whoami", "xargs", "yes",
}

// BusyboxEnv is the image's environment.
var BusyboxEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// File is a file Busybox adds to the image.
type File struct {
	Content []byte
	Mode    fs.FileMode // permission bits; 0 means 0644
}

// buildTime is every entry's mtime: a fixed time keeps layer digests stable,
// so a rebuilt image reuses the layers already unpacked.
var buildTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Busybox builds a small linux/amd64 image from this machine's static
// /bin/busybox: the binary, BusyboxApplets, /etc/passwd and /etc/group with
// root, /tmp (1777), /root, /home and empty /dev, /proc, /sys. The extra files
// (absolute or relative paths) go into a second layer, with their parent
// directories. Cmd is /bin/sh, WorkingDir /root, Env BusyboxEnv.
func Busybox(extra map[string]File) (v1.Image, error) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	if err := checkStatic(bin); err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}

	base := []TarEntry{
		dirEntry("bin", 0o755), dirEntry("dev", 0o755), dirEntry("etc", 0o755),
		dirEntry("home", 0o755), dirEntry("proc", 0o555), dirEntry("root", 0o700),
		dirEntry("sys", 0o555), dirEntry("tmp", 0o1777),
		fileEntry("bin/busybox", bin, 0o755),
		fileEntry("etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), 0o644),
		fileEntry("etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644),
	}
	for _, a := range BusyboxApplets {
		base = append(base, TarEntry{Header: tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}})
	}
	layers := [][]TarEntry{base}
	if len(extra) > 0 {
		layers = append(layers, extraEntries(extra))
	}

	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), &v1.ConfigFile{
		Architecture: PlatformArch,
		OS:           PlatformOS,
		Created:      v1.Time{Time: buildTime},
		Config:       v1.Config{Env: BusyboxEnv, WorkingDir: "/root", Cmd: []string{"/bin/sh"}},
	})
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, entries := range layers {
		l, err := TarLayer(entries...)
		if err != nil {
			return nil, fmt.Errorf("busybox image: %w", err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, fmt.Errorf("busybox image: %w", err)
		}
	}
	return img, nil
}

// checkStatic refuses a dynamically linked busybox: it would not run in an
// image without its libraries.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s: %w", BusyboxPath, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; install busybox-static", BusyboxPath)
		}
	}
	return nil
}

func extraEntries(extra map[string]File) []TarEntry {
	dirs := map[string]bool{}
	var files []TarEntry
	for p, f := range extra {
		name := strings.TrimPrefix(path.Clean("/"+p), "/")
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		files = append(files, fileEntry(name, f.Content, int64(mode)))
	}
	var entries []TarEntry
	for d := range dirs {
		entries = append(entries, dirEntry(d, 0o755))
	}
	// Sorted: parents before children, and the same bytes (digest) every build.
	entries = append(entries, files...)
	slices.SortFunc(entries, func(a, b TarEntry) int { return strings.Compare(a.Header.Name, b.Header.Name) })
	return entries
}

// TarEntry is one entry of a layer TarLayer builds. Header.Size is set from
// Body.
type TarEntry struct {
	Header tar.Header
	Body   []byte
}

func dirEntry(name string, mode int64) TarEntry {
	return TarEntry{Header: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}}
}

func fileEntry(name string, body []byte, mode int64) TarEntry {
	return TarEntry{Header: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, Body: body}
}

// TarLayer builds a gzip OCI layer from entries in order. Entries without a
// ModTime get a fixed one so equal input gives an equal digest.
func TarLayer(entries ...TarEntry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := e.Header
		hdr.Size = int64(len(e.Body))
		if hdr.ModTime.IsZero() {
			hdr.ModTime = buildTime
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, fmt.Errorf("tar %q: %w", hdr.Name, err)
		}
		if _, err := tw.Write(e.Body); err != nil {
			return nil, fmt.Errorf("tar %q: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}
