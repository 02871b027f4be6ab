package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/builtin"
)

// TestBuildsEveryPluginIntoAWorkingModule builds the plugins and then speaks ABI version 1 to
// each under wazero, as the host does, to check the SDK's side of it: the exports, the request
// buffer, the replies in memory.
func TestBuildsEveryPluginIntoAWorkingModule(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	built, err := build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names, files []string
	for _, f := range built {
		name, ok := strings.CutSuffix(filepath.Base(f), ".wasm")
		if !ok {
			continue
		}
		files, names = append(files, f), append(names, name)
		var d abi.Descriptor
		js, err := os.ReadFile(filepath.Join(dir, name+builtin.DescriptorSuffix))
		if err != nil || json.Unmarshal(js, &d) != nil || d.Name != name {
			t.Errorf("descriptor written for %s: %q, %v", name, js, err)
		}
	}
	for _, want := range []string{"bash", "claude-code", "codex"} {
		if !slices.Contains(names, want) {
			t.Errorf("built %v, missing %s", names, want)
		}
	}

	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	for i, f := range files {
		t.Run(names[i], func(t *testing.T) {
			wasm, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(wasm, []byte("\x00asm")) {
				t.Fatalf("%s does not start with the wasm magic: % x", f, wasm[:min(4, len(wasm))])
			}
			mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(names[i]).WithStartFunctions("_initialize"))
			if err != nil {
				t.Fatal(err)
			}
			speakABI(t, ctx, mod, names[i])
		})
	}
}

func speakABI(t *testing.T, ctx context.Context, mod api.Module, name string) {
	if v := callExport(t, ctx, mod, abi.ExportVersion); v != abi.Version {
		t.Fatalf("ABI version %d, want %d", v, abi.Version)
	}

	var d abi.Descriptor
	decodeOK(t, reply(t, ctx, mod, abi.ExportDescribe, nil), &d)
	if d.Name != name {
		t.Fatalf("describes itself as %q, want %q", d.Name, name)
	}

	var plan abi.Plan
	decodeOK(t, reply(t, ctx, mod, abi.ExportPlan, []byte(`{"prompt":"echo hé"}`)), &plan)
	if len(plan.Argv) == 0 || !strings.Contains(strings.Join(plan.Argv, " ")+plan.Stdin, "echo hé") {
		t.Fatalf("plan %+v does not carry the prompt", plan)
	}

	var res abi.ParseResult
	decodeOK(t, reply(t, ctx, mod, abi.ExportParse, []byte(`{"final":true,"exit_status":0}`)), &res)
	if n := len(res.Events); n == 0 || res.Events[n-1].Kind != abi.KindTurnDone {
		t.Fatalf("a run that ends reports %+v, want turn.done last", res.Events)
	}

	if r := reply(t, ctx, mod, abi.ExportPlan, []byte(`{"prompt":`)); !strings.Contains(r.Error, "decode request") {
		t.Fatalf("a broken request answered %+v", r)
	}

	// A request the module did not hand out a buffer for is refused, not read.
	r := decodeReply(t, mod, callExport(t, ctx, mod, abi.ExportPlan, 16, 8))
	if !strings.Contains(r.Error, "is not in the buffer") {
		t.Fatalf("a request outside the buffer answered %+v", r)
	}
}

// reply makes one call the way the host does: the request written into a buffer from
// hangar_alloc, the answer read where the packed result points.
func reply(t *testing.T, ctx context.Context, mod api.Module, export string, req []byte) abi.Reply {
	t.Helper()
	if req == nil {
		return decodeReply(t, mod, callExport(t, ctx, mod, export))
	}
	ptr := callExport(t, ctx, mod, abi.ExportAlloc, uint64(len(req)))
	if !mod.Memory().Write(uint32(ptr), req) {
		t.Fatalf("%s gave a buffer at %d outside memory", abi.ExportAlloc, ptr)
	}
	return decodeReply(t, mod, callExport(t, ctx, mod, export, ptr, uint64(len(req))))
}

func callExport(t *testing.T, ctx context.Context, mod api.Module, name string, params ...uint64) uint64 {
	t.Helper()
	fn := mod.ExportedFunction(name)
	if fn == nil {
		t.Fatalf("module does not export %s", name)
	}
	out, err := fn.Call(ctx, params...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out[0]
}

func decodeReply(t *testing.T, mod api.Module, packed uint64) abi.Reply {
	t.Helper()
	b, ok := mod.Memory().Read(uint32(packed>>32), uint32(packed))
	if !ok {
		t.Fatalf("reply at %d+%d is outside memory", packed>>32, uint32(packed))
	}
	var r abi.Reply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %q: %v", b, err)
	}
	return r
}

func decodeOK(t *testing.T, r abi.Reply, v any) {
	t.Helper()
	if r.Error != "" {
		t.Fatalf("error reply: %s", r.Error)
	}
	if err := json.Unmarshal(r.OK, v); err != nil {
		t.Fatalf("ok %s: %v", r.OK, err)
	}
}
