// Command buildplugins builds every harness plugin under harnesses/plugins to <dir>/<name>.wasm,
// a WASI reactor (-buildmode=c-shared, so its exports stay callable), where name is the
// plugin's directory (harnesses/plugins/<name>/plugin is its main package):
//
//	go run ./harnesses/plugins/cmd/buildplugins -o harnesses/builtin/wasm
//
// A plugin is a main package there that imports the SDK; it is found with `go list`, so the
// command runs from anywhere inside the module and needs nothing but the go tool.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/hangar-dev/hangar/harnesses/builtin"
	"github.com/hangar-dev/hangar/harnesses/harness"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

const (
	pluginsPattern = "github.com/hangar-dev/hangar/harnesses/plugins/..."
	sdkPackage     = "github.com/hangar-dev/hangar/harnesses/sdk"
)

func main() {
	out := flag.String("o", "", "directory to write <name>.wasm into (created if missing)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: buildplugins -o DIR")
		os.Exit(2)
	}
	built, err := build(context.Background(), *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildplugins:", err)
		os.Exit(1)
	}
	for _, f := range built {
		fmt.Println(f)
	}
}

// wasip1 is the environment of the go tool for plugins: build them, and list them with the files
// that only wasip1 builds see.
func wasip1() []string {
	return append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
}

// build builds every plugin into dir and returns the files written, sorted.
func build(ctx context.Context, dir string) ([]string, error) {
	pkgs, err := plugins(ctx)
	if err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no plugins in %s", pluginsPattern)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	files := make([]string, len(pkgs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.NumCPU())
	for i, pkg := range pkgs {
		files[i] = filepath.Join(dir, pluginName(pkg)+".wasm")
		g.Go(func() error {
			return goBuild(gctx, pkg, files[i])
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	descriptors, err := describe(ctx, files)
	if err != nil {
		return nil, err
	}
	files = append(files, descriptors...)
	slices.Sort(files)
	return files, nil
}

// describe loads each built plugin the way Hangar does and writes what it describes next to it
// (<name>.descriptor.json), so that listing the built-in harnesses compiles nothing. Compiled
// modules are cached in the user's cache dir: a plugin whose bytes did not change loads in
// milliseconds the next time.
func describe(ctx context.Context, wasmFiles []string) ([]string, error) {
	cache := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(dir, "hangar", "wasm-compile")
	}
	rt, err := wasm.NewRuntime(ctx, wasm.Options{CacheDir: cache, Instances: 1})
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	out := make([]string, len(wasmFiles))
	for i, f := range wasmFiles {
		module, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := harness.Load(ctx, rt, module)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", f, err)
		}
		js, err := json.MarshalIndent(p.Descriptor(), "", "  ")
		if err != nil {
			return nil, err
		}
		out[i] = strings.TrimSuffix(f, ".wasm") + builtin.DescriptorSuffix
		if err := os.WriteFile(out[i], append(js, '\n'), 0o644); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// plugins lists the import paths of the main packages under harnesses/plugins that import the
// SDK.
func plugins(ctx context.Context) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-f",
		`{{if eq .Name "main"}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{"\n"}}{{end}}`, pluginsPattern)
	cmd.Env = wasip1()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", pluginsPattern, err, stderr.Bytes())
	}
	var pkgs []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) > 1 && slices.Contains(fields[1:], sdkPackage) {
			pkgs = append(pkgs, fields[0])
		}
	}
	return pkgs, nil
}

// pluginName is the name of the plugin whose main package is pkg: .../plugins/<name>/plugin.
func pluginName(pkg string) string { return path.Base(path.Dir(pkg)) }

// goBuild builds the plugin pkg into file.
func goBuild(ctx context.Context, pkg, file string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s", "-o", file, pkg)
	cmd.Env = wasip1()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", pkg, err, bytes.TrimSpace(out))
	}
	return nil
}
