// Command agentimage builds the agent image (`make agent-image`): Debian with git,
// ca-certificates and Node.js, and the real Claude Code and Codex CLIs at pinned versions, as an
// OCI image layout that `hangar dev` serves from its dev registry as hangar/agent:latest (see
// sandboxhosts/devimage). It reaches only Debian's archive (through mmdebstrap) and the npm
// registry (through npm), so it builds on a machine whose network offers those two alone.
//
// The image is big (the CLIs alone are ~760 MB), so a build is cached: the layout is rebuilt
// only when Recipe changes, which names everything the image is made of.
//
// Layers: Debian's root filesystem as mmdebstrap makes it (with the user agent, uid 1000), then
// the CLIs under /opt/hangar-agents with their commands linked into /usr/local/bin. The image's
// user is agent, its working directory /home/agent.
package main

import (
	"archive/tar"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hangar-dev/hangar/sandboxhosts/devimage"
)

// What the image is made of. Change Recipe with any of them, so that cached builds are redone.
const (
	Suite    = "bookworm"
	Packages = "git,ca-certificates,nodejs,bash,openssh-client,less,procps"
	Claude   = "@anthropic-ai/claude-code@2.1.328"
	Codex    = "@openai/codex@0.169.0"
	Recipe   = "2 " + Suite + " " + Packages + " " + Claude + " " + Codex

	// RecipeAnnotation marks the layout's image with its Recipe.
	RecipeAnnotation = "dev.hangar.agentimage.recipe"
	// agentsDir is where the CLIs are installed in the image.
	agentsDir = "/opt/hangar-agents"
)

func main() {
	out := flag.String("o", ".data/image/images/agent", "directory of the OCI image layout to write (hangar dev serves <data>/image/images/<name>)")
	force := flag.Bool("force", false, "rebuild even when the layout holds this recipe's image")
	clis := flag.String("clis", "", "only install the image's CLIs with npm into this directory (make agent-clis), for tests that run them on this machine")
	rootfs := flag.String("rootfs", "", "a tar of the Debian root filesystem mmdebstrap made before, instead of making it again")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *clis != "" {
		err = installCLIs(ctx, *clis)
	} else {
		err = run(ctx, *out, *rootfs, *force)
	}
	if err != nil {
		log.Fatalf("agentimage: %v", err)
	}
}

// installCLIs installs the pinned CLIs with npm under dir (node_modules/.bin holds their
// commands). Scripts must run: claude-code's postinstall puts its platform's native binary in
// place of its command's placeholder.
func installCLIs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := command(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--omit=dev", Claude, Codex); err != nil {
		return fmt.Errorf("npm install: %w", err)
	}
	return nil
}

func run(ctx context.Context, out, rootfs string, force bool) error {
	if !force && cached(out) {
		log.Printf("%s already holds the agent image of this recipe", out)
		return nil
	}
	work, err := os.MkdirTemp("", "hangar-agentimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	start := time.Now()
	if rootfs == "" {
		rootfs = filepath.Join(work, "rootfs.tar")
		if err := debian(ctx, rootfs); err != nil {
			return err
		}
		log.Printf("debian root filesystem in %s", time.Since(start).Round(time.Second))
	}

	start = time.Now()
	npmDir := filepath.Join(work, "agents")
	if err := installCLIs(ctx, npmDir); err != nil {
		return err
	}
	log.Printf("agent CLIs in %s", time.Since(start).Round(time.Second))

	start = time.Now()
	base, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return err
	}
	agents, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return tarDir(npmDir, agentsDir) })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, base, agents)
	if err != nil {
		return err
	}
	img, err = mutate.Config(img, v1.Config{
		User:       "agent",
		WorkingDir: "/home/agent",
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=/home/agent",
			"LANG=C.UTF-8",
		},
		Cmd:    []string{"/bin/bash"},
		Labels: map[string]string{RecipeAnnotation: Recipe},
	})
	if err != nil {
		return err
	}
	if err := write(out, img); err != nil {
		return err
	}
	log.Printf("image written to %s in %s", out, time.Since(start).Round(time.Second))
	return nil
}

// debian makes Debian's root filesystem, with the user agent, as a tar at path.
func debian(ctx context.Context, path string) error {
	err := command(ctx, "mmdebstrap", "--variant=minbase", "--include="+Packages,
		`--customize-hook=chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash agent`,
		// No translations, documentation or locales: the image is for running agents.
		"--aptopt=Acquire::Languages \"none\"", "--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
		// No device nodes: a sandbox gets its own /dev, and unpacking skips them anyway.
		"--skip=output/dev",
		Suite, path)
	if err != nil {
		return fmt.Errorf("debian root filesystem: %w", err)
	}
	return nil
}

// command runs name with args, its output on ours.
func command(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// tarDir is a tar stream of the npm prefix dir as dest in the image, with each command of
// node_modules/.bin linked from /usr/local/bin. Hard links stay hard links (Claude Code's
// package links its native binary twice), so the layer holds each file once.
func tarDir(dir, dest string) (io.ReadCloser, error) {
	r, w := io.Pipe()
	go func() {
		tw := tar.NewWriter(w)
		err := writeTree(tw, dir, dest)
		if err == nil {
			err = linkCommands(tw, filepath.Join(dir, "node_modules", ".bin"), dest+"/node_modules/.bin")
		}
		if err == nil {
			err = tw.Close()
		}
		w.CloseWithError(err)
	}()
	return r, nil
}

// writeTree writes the files under dir into tw as dest, parents first, without their owners.
func writeTree(tw *tar.Writer, dir, dest string) error {
	seen := map[uint64]string{} // inode -> name already written, for hard links
	for _, parent := range parents(dest) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: parent + "/", Mode: 0o755}); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(filepath.ToSlash(filepath.Join(dest, rel)), "/")
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = name, 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && info.Mode().IsRegular() && st.Nlink > 1 {
			if first, ok := seen[st.Ino]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(h)
			}
			seen[st.Ino] = name
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
}

// parents are the directories above dest, outermost first, without the leading slash.
func parents(dest string) []string {
	var out []string
	parts := strings.Split(strings.Trim(dest, "/"), "/")
	for i := 1; i < len(parts); i++ {
		out = append(out, strings.Join(parts[:i], "/"))
	}
	return out
}

// linkCommands links /usr/local/bin/<name> to each command in binDir, which is binIn in the
// image.
func linkCommands(tw *tar.Writer, binDir, binIn string) error {
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		h := &tar.Header{Typeflag: tar.TypeSymlink, Name: "usr/local/bin/" + e.Name(), Linkname: binIn + "/" + e.Name(), Mode: 0o777}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	return nil
}

// cached reports whether the layout at dir holds one image, of this Recipe.
func cached(dir string) bool {
	img, err := devimage.OnlyImage(dir)
	if err != nil {
		return false
	}
	cf, err := img.ConfigFile()
	return err == nil && cf.Config.Labels[RecipeAnnotation] == Recipe
}

// write replaces the layout at dir with one holding img alone, written next to it first.
func write(dir string, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "latest"})); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
