// Package builtin holds the harness plugins Hangar ships: harnesses/plugins/<name>, built to
// WebAssembly by `make plugins` into wasm/ — each module with the descriptor it gave when loaded,
// so that listing them compiles nothing — and embedded in the binary. A binary built without them
// (plain `go build` on a fresh clone) has none; make dev, make test and make deploy build them
// first.
package builtin

import (
	"embed"
	"io/fs"
	"path"
	"strings"
)

// DescriptorSuffix ends the file holding a module's descriptor: <name>.descriptor.json.
const DescriptorSuffix = ".descriptor.json"

//go:embed wasm
var files embed.FS

// Module is one built-in plugin.
type Module struct {
	Wasm []byte
	// Descriptor is the JSON abi.Descriptor the module gave when built; nil if missing.
	Descriptor []byte
}

// Modules returns the embedded plugins by name (the file name without .wasm).
func Modules() map[string]Module {
	out := map[string]Module{}
	entries, _ := fs.ReadDir(files, "wasm")
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".wasm")
		if !ok || e.IsDir() {
			continue
		}
		wasm, err := files.ReadFile(path.Join("wasm", e.Name()))
		if err != nil {
			continue
		}
		desc, _ := files.ReadFile(path.Join("wasm", name+DescriptorSuffix))
		out[name] = Module{Wasm: wasm, Descriptor: desc}
	}
	return out
}
