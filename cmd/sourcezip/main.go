// Command sourcezip writes the Cloud Run functions' source archive that `make deploy` hands to
// Terraform: the module's files as git tracks them (and untracked files git does not ignore),
// plus the build outputs the functions embed and git ignores — the built-in harness plugins,
// the JavaScript guest and the dashboard — without what the functions do not build from (the
// dashboard's sources and node_modules, local tools and data). Entries carry no times, so the
// same tree gives the same archive and Terraform uploads (and Cloud Run rebuilds) only a
// changed one.
package main

import (
	"archive/zip"
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// builtOutputs are the ignored directories whose files the functions embed (go:embed).
var builtOutputs = []string{"harnesses/builtin/wasm", "automation/jsbox/wasm", "web/dist"}

// leftOut are the prefixes not uploaded: what no function builds from.
var leftOut = []string{"web/src/", "web/node_modules/", ".tools/", ".data/", "bin/"}

func main() {
	out := flag.String("o", "bin/source.zip", "the archive to write")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "sourcezip:", err)
		os.Exit(1)
	}
}

func write(out string) error {
	listed, err := exec.Command("git", "ls-files", "-co", "--exclude-standard", "-z").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	files := strings.Split(strings.TrimRight(string(listed), "\x00"), "\x00")
	for _, dir := range builtOutputs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files = append(files, filepath.ToSlash(path))
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("the build outputs (run make plugins web first): %w", err)
		}
	}
	slices.Sort(files)
	files = slices.Compact(files)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		if slices.ContainsFunc(leftOut, func(p string) bool { return strings.HasPrefix(f, p) }) {
			continue
		}
		info, err := os.Lstat(f)
		if err != nil {
			if os.IsNotExist(err) { // deleted but not yet committed
				continue
			}
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		hdr := &zip.FileHeader{Name: f, Method: zip.Deflate}
		hdr.SetMode(info.Mode().Perm())
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
