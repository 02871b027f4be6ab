// Package harness runs harness plugins (see package abi) on the WebAssembly runtime of
// runtimes/wasm: it checks that a module speaks this ABI, asks it to describe itself, and checks
// every answer against the ABI's rules, so that a plugin's errors are *wasm.Error like any
// module's.
package harness

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// Kind is what a plugin is called in errors.
const Kind = "harness plugin"

// exports are the ABI's exports beside hangar_alloc, with their types; optional are those a
// module may leave out.
var (
	exports = map[string]wasm.Signature{
		abi.ExportVersion:  {Results: []api.ValueType{api.ValueTypeI32}},
		abi.ExportDescribe: wasm.Answer,
		abi.ExportPlan:     wasm.RequestAnswer,
		abi.ExportParse:    wasm.RequestAnswer,
	}
	optional = map[string]wasm.Signature{abi.ExportToolResult: wasm.RequestAnswer, abi.ExportParseRaw: wasm.RequestAnswer}
)

// Plugin is a loaded harness plugin. Calls may come from any number of goroutines; each runs
// alone on one of the module's instances.
type Plugin struct {
	m    *wasm.Module
	desc abi.Descriptor
}

// Load compiles a plugin module on rt (from the cache when it was compiled before), checks that
// it speaks this ABI and asks it to describe itself.
func Load(ctx context.Context, rt *wasm.Runtime, module []byte) (*Plugin, error) {
	m, err := rt.Load(ctx, wasm.Spec{Kind: Kind, Exports: exports, Optional: optional}, module)
	if err != nil {
		return nil, err
	}
	p, err := describe(ctx, m)
	if err != nil {
		m.Close(ctx)
		return nil, err
	}
	return p, nil
}

func describe(ctx context.Context, m *wasm.Module) (*Plugin, error) {
	v, err := m.CallI32(ctx, abi.ExportVersion)
	if err != nil {
		return nil, err
	}
	if v != abi.Version {
		return nil, m.Errorf(wasm.ErrBadModule, abi.ExportVersion, "speaks ABI version %d, the host speaks %d", v, abi.Version)
	}
	desc, err := wasm.Ask(ctx, m, abi.ExportDescribe, nil, checkDescriptor)
	if err != nil {
		return nil, err
	}
	m.SetName(desc.Name)
	return &Plugin{m: m, desc: desc}, nil
}

// Descriptor is what the plugin described when it was loaded. Its slices and maps are shared:
// read them, do not change them.
func (p *Plugin) Descriptor() abi.Descriptor { return p.desc }

// Describe asks the plugin again what it is.
func (p *Plugin) Describe(ctx context.Context) (abi.Descriptor, error) {
	return wasm.Ask(ctx, p.m, abi.ExportDescribe, nil, checkDescriptor)
}

// Plan asks how to launch the harness for one prompt.
func (p *Plugin) Plan(ctx context.Context, req abi.PlanRequest) (abi.Plan, error) {
	return wasm.Ask(ctx, p.m, abi.ExportPlan, &req, checkPlan)
}

// Parse hands the plugin the next chunk of the harness's output: raw through hangar_parse_raw
// when the plugin exports it, as JSON through hangar_parse otherwise. Callers hand it whole
// lines (see Carry).
func (p *Plugin) Parse(ctx context.Context, req abi.ParseRequest) (abi.ParseResult, error) {
	if !p.m.Exports(abi.ExportParseRaw) {
		return wasm.Ask(ctx, p.m, abi.ExportParse, &req, checkParseResult)
	}
	chunk := req.Chunk
	req.Chunk = ""
	header, err := json.Marshal(req)
	if err != nil {
		return abi.ParseResult{}, fmt.Errorf("%s %s: encode parse request: %w", Kind, p.desc.Name, err)
	}
	raw := make(wasm.Raw, 0, len(header)+1+len(chunk))
	raw = append(append(append(raw, header...), '\n'), chunk...)
	return wasm.Ask(ctx, p.m, abi.ExportParseRaw, raw, checkParseResult)
}

// TakesToolResults reports whether the plugin exports hangar_tool_result: whether its harness
// can be handed a client's tool result mid-turn.
func (p *Plugin) TakesToolResults() bool { return p.m.Exports(abi.ExportToolResult) }

// ToolResult asks how to deliver a client's tool result to the running harness. A plugin
// without the export is an ErrNotExported.
func (p *Plugin) ToolResult(ctx context.Context, req abi.ToolResultRequest) (abi.ToolResult, error) {
	if !p.TakesToolResults() {
		return abi.ToolResult{}, p.m.Errorf(wasm.ErrNotExported, abi.ExportToolResult, "is not exported: the harness takes no client tool results")
	}
	return wasm.Ask(ctx, p.m, abi.ExportToolResult, &req, func(*abi.ToolResult) error { return nil })
}

// Close frees the plugin's instances and compiled code; calls in flight finish on theirs.
// Closing twice is harmless.
func (p *Plugin) Close(ctx context.Context) error { return p.m.Close(ctx) }
