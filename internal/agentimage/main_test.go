package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The CLIs' layer holds the npm prefix under /opt/hangar-agents with its parents, each file once
// (a second hard link is a link entry), symlinks as symlinks, no owners, and a link in
// /usr/local/bin to each command.
func TestTarDirLaysOutTheCLIs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "node_modules", ".bin")
	pkg := filepath.Join(dir, "node_modules", "tool")
	for _, d := range []string{bin, pkg} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pkg, "native"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(pkg, "native"), filepath.Join(pkg, "copy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../tool/native", filepath.Join(bin, "tool")); err != nil {
		t.Fatal(err)
	}
	rc, err := tarDir(dir, agentsDir)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
			t.Errorf("%s has an owner: %d:%d %q", h.Name, h.Uid, h.Gid, h.Uname)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = string(h.Typeflag) + " " + h.Linkname + string(body)
	}
	want := map[string]string{
		"opt/":                                     "5 ",
		"opt/hangar-agents/":                       "5 ",
		"opt/hangar-agents/node_modules/":          "5 ",
		"opt/hangar-agents/node_modules/.bin/":     "5 ",
		"opt/hangar-agents/node_modules/.bin/tool": "2 ../tool/native",
		"opt/hangar-agents/node_modules/tool/":     "5 ",
		// Walked in lexical order: copy is first, so native is the link.
		"opt/hangar-agents/node_modules/tool/copy":   "0 binary",
		"opt/hangar-agents/node_modules/tool/native": "1 opt/hangar-agents/node_modules/tool/copy",
		"usr/local/bin/tool":                         "2 /opt/hangar-agents/node_modules/.bin/tool",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("layer entries\n%q\nwant\n%q", got, want)
	}
}
