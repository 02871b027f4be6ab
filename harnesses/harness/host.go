// Package harness runs harness plugins (see package abi) in wazero: it compiles and validates a
// module, keeps a pool of sandboxed instances per plugin, and turns every call into either a
// checked result or a typed error. Whatever a plugin does — loop, trap, exhaust its memory or
// answer garbage — costs at most that call and that instance, never the host process.
package harness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Defaults for Options left zero.
const (
	DefaultCallTimeout      = 2 * time.Second
	DefaultMemoryLimitBytes = 256 << 20
	DefaultMaxReplyBytes    = 16 << 20
)

// pageSize is the WebAssembly page size.
const pageSize = 65536

// Options bound what a plugin may cost. Zero values take the defaults.
type Options struct {
	// CacheDir keeps compiled modules on disk across processes; "" keeps them in memory only.
	CacheDir string
	// CallTimeout bounds each call into a plugin, instantiation included (DefaultCallTimeout).
	CallTimeout time.Duration
	// MemoryLimitBytes caps each instance's linear memory (DefaultMemoryLimitBytes), rounded
	// down to whole 64 KiB pages.
	MemoryLimitBytes uint64
	// MaxReplyBytes is the largest answer accepted (DefaultMaxReplyBytes).
	MaxReplyBytes int
	// Instances is how many instances of one plugin may exist and run at once
	// (runtime.GOMAXPROCS(0)); further calls wait for one to be free.
	Instances int
}

func (o Options) withDefaults() (Options, error) {
	if o.CallTimeout < 0 || o.MaxReplyBytes < 0 || o.Instances < 0 {
		return o, fmt.Errorf("plugin host options: negative CallTimeout, MaxReplyBytes or Instances: %+v", o)
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.MemoryLimitBytes == 0 {
		o.MemoryLimitBytes = DefaultMemoryLimitBytes
	}
	if o.MemoryLimitBytes < pageSize || o.MemoryLimitBytes > 1<<32 {
		return o, fmt.Errorf("plugin host options: MemoryLimitBytes %d is not between 64 KiB and 4 GiB", o.MemoryLimitBytes)
	}
	if o.MaxReplyBytes == 0 {
		o.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if o.Instances == 0 {
		o.Instances = runtime.GOMAXPROCS(0)
	}
	return o, nil
}

// Runtime compiles and runs plugins; all plugins loaded by one Runtime share its compilation
// cache and options. It is safe for concurrent use.
type Runtime struct {
	opts   Options
	wz     wazero.Runtime
	cache  wazero.CompilationCache
	wasi   map[string]api.FunctionDefinition // what a plugin may import
	closed atomic.Bool
}

// NewRuntime starts a runtime with WASI preview 1 and nothing else for plugins to import.
func NewRuntime(ctx context.Context, opts Options) (*Runtime, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var cache wazero.CompilationCache
	if opts.CacheDir != "" {
		if cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir); err != nil {
			return nil, fmt.Errorf("plugin compilation cache %s: %w", opts.CacheDir, err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	config := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(opts.MemoryLimitBytes / pageSize))
	wz := wazero.NewRuntimeWithConfig(ctx, config)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, wz); err != nil {
		wz.Close(ctx)
		cache.Close(ctx)
		return nil, fmt.Errorf("instantiate WASI for plugins: %w", err)
	}
	return &Runtime{
		opts:  opts,
		wz:    wz,
		cache: cache,
		wasi:  wz.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions(),
	}, nil
}

// Close closes every plugin of the runtime; calls in flight fail. Closing twice is harmless.
func (r *Runtime) Close(ctx context.Context) error {
	if r.closed.Swap(true) {
		return nil
	}
	return errors.Join(r.wz.Close(ctx), r.cache.Close(ctx))
}

// Load compiles a plugin module (from the cache when it was compiled before), checks that it
// speaks this ABI and asks it to describe itself.
func (r *Runtime) Load(ctx context.Context, wasm []byte) (*Plugin, error) {
	compiled, err := r.compile(ctx, wasm)
	if err != nil {
		return nil, err
	}
	p, err := r.load(ctx, compiled)
	if err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	return p, nil
}

func (r *Runtime) compile(ctx context.Context, wasm []byte) (wazero.CompiledModule, error) {
	if r.closed.Load() {
		return nil, &PluginError{Err: ErrClosed, Reason: "the plugin runtime is closed"}
	}
	compiled, err := r.wz.CompileModule(ctx, wasm)
	if err != nil {
		return nil, &PluginError{Err: ErrBadModule, Reason: fmt.Sprintf("not a WebAssembly module the host can run: %v", err)}
	}
	return compiled, nil
}

func (r *Runtime) load(ctx context.Context, compiled wazero.CompiledModule) (*Plugin, error) {
	init, err := r.checkLinks(compiled, signatures)
	if err != nil {
		return nil, &PluginError{Err: ErrBadModule, Reason: err.Error()}
	}
	p := newPlugin(r, compiled, init)
	inst, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	healthy := false
	defer func() { p.release(inst, healthy) }()
	if err := p.checkVersion(ctx, inst); err != nil {
		return nil, err
	}
	desc, err := answer(ctx, p, inst, abi.ExportDescribe, nil, checkDescriptor)
	if err != nil {
		return nil, err
	}
	healthy = true
	p.desc = desc
	return p, nil
}

// signatures are the exports of the ABI with their types.
var signatures = map[string]struct{ params, results []api.ValueType }{
	abi.ExportVersion:  {nil, []api.ValueType{api.ValueTypeI32}},
	abi.ExportAlloc:    {[]api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}},
	abi.ExportDescribe: {nil, []api.ValueType{api.ValueTypeI64}},
	abi.ExportPlan:     {[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
	abi.ExportParse:    {[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
}

// optionalSignatures are the exports a module may leave out, with their types when present.
var optionalSignatures = map[string]struct{ params, results []api.ValueType }{
	abi.ExportToolResult: {[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}},
}

const initializeExport = "_initialize"

// checkLinks refuses a module whose exports are not the ABI's or whose imports the host does not
// provide, so that such a module fails here with a reason rather than at its first call. It
// reports whether the module has an _initialize to run per instance. required are the exports
// it must have: signatures for a plugin, a reactor's own for a Reactor.
func (r *Runtime) checkLinks(compiled wazero.CompiledModule, required map[string]struct{ params, results []api.ValueType }) (initialize bool, err error) {
	exports := compiled.ExportedFunctions()
	for _, set := range []struct {
		sigs     map[string]struct{ params, results []api.ValueType }
		required bool
	}{{required, true}, {optionalSignatures, false}} {
		for name, want := range set.sigs {
			def, ok := exports[name]
			if !ok {
				if set.required {
					return false, fmt.Errorf("the module does not export %s", name)
				}
				continue
			}
			if !slices.Equal(def.ParamTypes(), want.params) || !slices.Equal(def.ResultTypes(), want.results) {
				return false, fmt.Errorf("export %s has signature %s, the ABI says %s", name,
					signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results))
			}
		}
	}
	if def, ok := exports[initializeExport]; ok {
		if len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0 {
			return false, fmt.Errorf("export %s has signature %s, want func()", initializeExport, signature(def.ParamTypes(), def.ResultTypes()))
		}
		initialize = true
	}
	if len(compiled.ExportedMemories()) == 0 {
		return false, errors.New("the module does not export its memory")
	}
	if len(compiled.ImportedMemories()) != 0 {
		return false, errors.New("the module imports a memory; it must define its own")
	}
	for _, imp := range compiled.ImportedFunctions() {
		module, name, _ := imp.Import()
		def, ok := r.wasi[name]
		if module != wasi_snapshot_preview1.ModuleName || !ok {
			return false, fmt.Errorf("the module imports %s.%s; plugins may import only %s", module, name, wasi_snapshot_preview1.ModuleName)
		}
		if !slices.Equal(def.ParamTypes(), imp.ParamTypes()) || !slices.Equal(def.ResultTypes(), imp.ResultTypes()) {
			return false, fmt.Errorf("the module imports %s.%s as %s, WASI has %s", module, name,
				signature(imp.ParamTypes(), imp.ResultTypes()), signature(def.ParamTypes(), def.ResultTypes()))
		}
	}
	return initialize, nil
}

func signature(params, results []api.ValueType) string {
	names := func(types []api.ValueType) string {
		s := ""
		for i, t := range types {
			if i > 0 {
				s += ", "
			}
			s += api.ValueTypeName(t)
		}
		return s
	}
	return fmt.Sprintf("func(%s) (%s)", names(params), names(results))
}
