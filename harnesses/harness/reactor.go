package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero/api"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Reactor is a WASI reactor that is not a harness plugin but follows the plugins' calling
// convention: each request is JSON written into a buffer from hangar_alloc, each answer an
// abi.Reply returned as (ptr << 32 | len). It runs in the same sandbox as a plugin, under the
// Runtime's limits, on a pool of instances that a failed call discards in the same way; its
// errors are *PluginError, with the reactor's name where a plugin's would be. automation/jsbox
// runs its JavaScript engine so.
type Reactor struct {
	p       *Plugin
	exports []string
}

// requestAnswer is the type of a reactor's exports: a request in, the packed answer out.
var requestAnswer = struct{ params, results []api.ValueType }{
	params:  []api.ValueType{api.ValueTypeI32, api.ValueTypeI32},
	results: []api.ValueType{api.ValueTypeI64},
}

// LoadReactor compiles a reactor named name (for errors) whose exports, each
// func(ptr i32, len i32) -> i64, take a request and give an answer; it must also export
// hangar_alloc. Instances are made when calls need them, so a reactor that cannot initialise
// fails its first call rather than the load.
func (r *Runtime) LoadReactor(ctx context.Context, name string, wasm []byte, exports ...string) (*Reactor, error) {
	compiled, err := r.compile(ctx, wasm)
	if err != nil {
		return nil, err
	}
	required := map[string]struct{ params, results []api.ValueType }{abi.ExportAlloc: signatures[abi.ExportAlloc]}
	for _, e := range exports {
		required[e] = requestAnswer
	}
	init, err := r.checkLinks(compiled, required)
	if err != nil {
		compiled.Close(ctx)
		return nil, &PluginError{Plugin: name, Err: ErrBadModule, Reason: err.Error()}
	}
	p := newPlugin(r, compiled, init)
	p.desc.Name = name
	return &Reactor{p: p, exports: exports}, nil
}

// Call sends req, encoded as JSON, to export on a free instance and returns the "ok" of the
// answer; an "error" answer is an ErrRefused.
func (x *Reactor) Call(ctx context.Context, export string, req any) (json.RawMessage, error) {
	if !slices.Contains(x.exports, export) {
		return nil, fmt.Errorf("reactor %q: %s is not one of its exports %v", x.p.desc.Name, export, x.exports)
	}
	return call(ctx, x.p, export, req, func(*json.RawMessage) error { return nil })
}

// Close frees the reactor's instances and compiled code; calls in flight finish on theirs.
func (x *Reactor) Close(ctx context.Context) error { return x.p.Close(ctx) }

// export is the function name of inst, looked up on first use: each lookup builds a new call
// engine, and a reactor's exports are known only to it.
func (inst *instance) export(name string) api.Function {
	fn, ok := inst.exports[name]
	if !ok {
		fn = inst.mod.ExportedFunction(name)
		inst.exports[name] = fn
	}
	return fn
}
