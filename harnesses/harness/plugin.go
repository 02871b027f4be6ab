package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Plugin is a loaded harness plugin: a compiled module and a pool of its instances. Calls may
// come from any number of goroutines; each runs alone on one instance.
type Plugin struct {
	rt       *Runtime
	compiled wazero.CompiledModule
	config   wazero.ModuleConfig
	desc     abi.Descriptor
	// toolResults is whether the module exports abi.ExportToolResult.
	toolResults bool

	// slots holds a token for every instance in use or being made; idle holds the others, so
	// at most Options.Instances exist. Instances are made on demand, since most plugins are
	// called far less often than in parallel.
	slots chan struct{}
	idle  chan *instance

	mu     sync.Mutex // orders Close against release, so no instance is pooled after Close
	closed bool
}

// instance is one instantiated module, used by one call at a time.
type instance struct {
	mod     api.Module
	exports map[string]api.Function // looked up once: each lookup builds a new call engine
	stderr  stderrCapture
}

func newPlugin(r *Runtime, compiled wazero.CompiledModule, initialize bool) *Plugin {
	// No files, environment or real clocks: wazero's defaults are the sandbox. A name in argv
	// because Go programs index os.Args[0] at startup (package flag does).
	config := wazero.NewModuleConfig().WithName("").WithArgs("hangar-plugin").WithStartFunctions()
	if initialize {
		config = config.WithStartFunctions(initializeExport)
	}
	_, toolResults := compiled.ExportedFunctions()[abi.ExportToolResult]
	return &Plugin{
		rt:          r,
		compiled:    compiled,
		config:      config,
		toolResults: toolResults,
		slots:       make(chan struct{}, r.opts.Instances),
		idle:        make(chan *instance, r.opts.Instances),
	}
}

// Descriptor is what the plugin described when it was loaded. Its slices and maps are shared:
// read them, do not change them.
func (p *Plugin) Descriptor() abi.Descriptor { return p.desc }

// Describe asks the plugin again what it is.
func (p *Plugin) Describe(ctx context.Context) (abi.Descriptor, error) {
	return call(ctx, p, abi.ExportDescribe, nil, checkDescriptor)
}

// Plan asks how to launch the harness for one prompt.
func (p *Plugin) Plan(ctx context.Context, req abi.PlanRequest) (abi.Plan, error) {
	return call(ctx, p, abi.ExportPlan, &req, checkPlan)
}

// Parse hands the plugin the next chunk of the harness's output.
func (p *Plugin) Parse(ctx context.Context, req abi.ParseRequest) (abi.ParseResult, error) {
	return call(ctx, p, abi.ExportParse, &req, checkParseResult)
}

// TakesToolResults reports whether the plugin exports hangar_tool_result: whether its harness
// can be handed a client's tool result mid-turn.
func (p *Plugin) TakesToolResults() bool { return p.toolResults }

// ToolResult asks how to deliver a client's tool result to the running harness. A plugin
// without the export is an ErrNotExported.
func (p *Plugin) ToolResult(ctx context.Context, req abi.ToolResultRequest) (abi.ToolResult, error) {
	if !p.TakesToolResults() {
		return abi.ToolResult{}, p.errorf(ErrNotExported, abi.ExportToolResult, "is not exported: the harness takes no client tool results")
	}
	return call(ctx, p, abi.ExportToolResult, &req, func(*abi.ToolResult) error { return nil })
}

// Close frees the plugin's instances and compiled code; calls in flight finish on theirs.
// Closing twice is harmless.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		// The compiled code is counted per module content in the runtime: closing it twice
		// would take it from another plugin of the same module.
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var errs []error
	for len(p.idle) > 0 {
		errs = append(errs, (<-p.idle).mod.Close(ctx))
	}
	p.mu.Unlock()
	errs = append(errs, p.compiled.Close(ctx))
	return errors.Join(errs...)
}

// call runs export on a pooled instance.
func call[T any](ctx context.Context, p *Plugin, export string, req any, check func(*T) error) (T, error) {
	var zero T
	inst, err := p.acquire(ctx)
	if err != nil {
		return zero, err
	}
	res, err := answer(ctx, p, inst, export, req, check)
	// A refusal is a well-formed answer; anything else may have left the instance broken
	// (a Go guest that trapped has a runtime in an unknown state), so it goes.
	p.release(inst, err == nil || errors.Is(err, ErrRefused))
	return res, err
}

// acquire takes an idle instance or makes one, waiting while Options.Instances are in use.
func (p *Plugin) acquire(ctx context.Context) (*instance, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: waiting for a free instance: %w", where(p.desc.Name, ""), ctx.Err())
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		<-p.slots
		return nil, p.errorf(ErrClosed, "", "the plugin is closed")
	}
	select {
	case inst := <-p.idle:
		return inst, nil
	default:
	}
	inst, err := p.instantiate(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return inst, nil
}

// release pools a healthy instance and closes any other.
func (p *Plugin) release(inst *instance, healthy bool) {
	p.mu.Lock()
	if healthy && !p.closed {
		p.idle <- inst
	} else {
		// Closing an instance frees its memory; the only error is about that instance, which
		// is gone either way.
		_ = inst.mod.Close(context.Background())
	}
	p.mu.Unlock()
	<-p.slots
}

func (p *Plugin) instantiate(ctx context.Context) (*instance, error) {
	if p.rt.closed.Load() {
		return nil, p.errorf(ErrClosed, "", "the plugin runtime is closed")
	}
	inst := &instance{exports: make(map[string]api.Function, len(signatures))}
	callCtx, cancel := context.WithTimeout(ctx, p.rt.opts.CallTimeout)
	defer cancel()
	mod, err := p.rt.wz.InstantiateModule(callCtx, p.compiled, p.config.WithStderr(&inst.stderr))
	if err != nil {
		return nil, p.failure(ctx, callCtx, inst, initializeExport, fmt.Errorf("instantiate: %w", err))
	}
	inst.mod = mod
	for name := range signatures {
		inst.exports[name] = mod.ExportedFunction(name)
	}
	for name := range optionalSignatures {
		if f := mod.ExportedFunction(name); f != nil {
			inst.exports[name] = f
		}
	}
	return inst, nil
}

// checkVersion refuses a module of another ABI version.
func (p *Plugin) checkVersion(ctx context.Context, inst *instance) error {
	callCtx, cancel := context.WithTimeout(ctx, p.rt.opts.CallTimeout)
	defer cancel()
	inst.stderr.reset()
	res, err := inst.exports[abi.ExportVersion].Call(callCtx)
	if err != nil {
		return p.failure(ctx, callCtx, inst, abi.ExportVersion, err)
	}
	if v := int32(res[0]); v != abi.Version {
		return &PluginError{Export: abi.ExportVersion, Err: ErrBadModule, Reason: fmt.Sprintf("speaks ABI version %d, the host speaks %d", v, abi.Version)}
	}
	return nil
}

// answer calls export on inst with req (nil for none) and reads its answer into a checked T.
func answer[T any](ctx context.Context, p *Plugin, inst *instance, export string, req any, check func(*T) error) (T, error) {
	var res T
	callCtx, cancel := context.WithTimeout(ctx, p.rt.opts.CallTimeout)
	defer cancel()
	inst.stderr.reset()
	var params []uint64
	if req != nil {
		body, err := json.Marshal(req)
		if err != nil {
			return res, fmt.Errorf("%s: encode request: %w", where(p.desc.Name, export), err)
		}
		ptr, err := p.write(ctx, callCtx, inst, body)
		if err != nil {
			return res, err
		}
		params = []uint64{uint64(ptr), uint64(len(body))}
	}
	out, err := inst.export(export).Call(callCtx, params...)
	if err != nil {
		return res, p.failure(ctx, callCtx, inst, export, err)
	}
	ptr, size := uint32(out[0]>>32), uint32(out[0])
	if size > uint32(p.rt.opts.MaxReplyBytes) {
		return res, p.errorf(ErrBadAnswer, export, "answered %d bytes, more than the %d allowed", size, p.rt.opts.MaxReplyBytes)
	}
	// The view stays valid while this call owns inst, and decoding copies what it keeps.
	reply, ok := inst.mod.Memory().Read(ptr, size)
	if !ok {
		return res, p.errorf(ErrBadAnswer, export, "answered (%#x, %d), outside its %d bytes of memory", ptr, size, inst.mod.Memory().Size())
	}
	refusal, err := decodeReply(reply, &res)
	if err != nil {
		return res, p.errorf(ErrBadAnswer, export, "answered %s", err)
	}
	if refusal != "" {
		return res, p.errorf(ErrRefused, export, "refused: %s", refusal)
	}
	if err := check(&res); err != nil {
		return res, p.errorf(ErrBadAnswer, export, "answered %s", err)
	}
	return res, nil
}

// write puts a request into a buffer the module allocates for it.
func (p *Plugin) write(ctx, callCtx context.Context, inst *instance, body []byte) (uint32, error) {
	if uint64(len(body)) > min(p.rt.opts.MemoryLimitBytes, math.MaxInt32) {
		return 0, p.errorf(ErrMemory, abi.ExportAlloc, "a request of %d bytes does not fit in %d bytes of memory", len(body), p.rt.opts.MemoryLimitBytes)
	}
	res, err := inst.exports[abi.ExportAlloc].Call(callCtx, uint64(len(body)))
	if err != nil {
		return 0, p.failure(ctx, callCtx, inst, abi.ExportAlloc, err)
	}
	ptr := uint32(res[0])
	if !inst.mod.Memory().Write(ptr, body) {
		return 0, p.errorf(ErrBadAnswer, abi.ExportAlloc, "handed out %d bytes at %#x, outside its %d bytes of memory", len(body), ptr, inst.mod.Memory().Size())
	}
	return ptr, nil
}

// failure explains an error of a call into inst under callCtx, derived from the caller's ctx.
func (p *Plugin) failure(ctx, callCtx context.Context, inst *instance, export string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", where(p.desc.Name, export), ctx.Err())
	}
	if p.rt.closed.Load() {
		return p.errorf(ErrClosed, export, "the plugin runtime closed during the call")
	}
	if exit, ok := errors.AsType[*sys.ExitError](err); (ok && exit.ExitCode() == sys.ExitCodeDeadlineExceeded) || callCtx.Err() != nil {
		return p.errorf(ErrTimeout, export, "ran past its %s deadline", p.rt.opts.CallTimeout)
	}
	// The message keeps the first line of each report; the detail keeps them whole, wasm
	// stack trace and all, for the logs of whoever debugs the plugin.
	summary, _, _ := strings.Cut(err.Error(), "\n")
	detail := err.Error()
	stderr := inst.stderr.String()
	if stderr != "" {
		first, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n\n")
		if len(first) > stderrSummarized {
			first = first[:stderrSummarized] + "…"
		}
		summary += fmt.Sprintf(" (it wrote %q)", first)
		detail += "\nstderr:\n" + stderr
	}
	kind, reason := ErrTrap, "trapped: "
	// A Go guest says it ran out of memory on stderr, then traps; other guests just trap,
	// and then their memory at its cap tells.
	if strings.Contains(stderr, "out of memory") || (inst.mod != nil && uint64(inst.mod.Memory().Size()) >= p.rt.opts.MemoryLimitBytes) {
		kind, reason = ErrMemory, fmt.Sprintf("exhausted its %d MiB of memory: ", p.rt.opts.MemoryLimitBytes>>20)
	}
	e := p.errorf(kind, export, "%s%s", reason, summary)
	e.Detail = detail
	return e
}

func (p *Plugin) errorf(kind error, export, format string, args ...any) *PluginError {
	return &PluginError{Plugin: p.desc.Name, Export: export, Err: kind, Reason: fmt.Sprintf(format, args...)}
}

// stderrCapture keeps the start of what an instance writes to stderr during one call: a Go
// guest's panic message and stack are there, and a plugin that logs a lot must not cost the
// host memory.
type stderrCapture struct{ buf []byte }

// stderrKept bounds what is kept of stderr per call, stderrSummarized the part of it in messages.
const (
	stderrKept       = 4096
	stderrSummarized = 300
)

func (c *stderrCapture) Write(b []byte) (int, error) {
	if room := stderrKept - len(c.buf); room > 0 {
		c.buf = append(c.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (c *stderrCapture) reset() { c.buf = c.buf[:0] }

func (c *stderrCapture) String() string { return strings.ToValidUTF8(string(c.buf), "?") }
