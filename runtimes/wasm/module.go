package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// Module is a loaded module: its compiled code and a pool of its instances. Calls may come from
// any number of goroutines; each runs alone on one instance.
type Module struct {
	rt       *Runtime
	compiled wazero.CompiledModule
	config   wazero.ModuleConfig
	kind     string
	name     atomic.Pointer[string]
	exports  map[string]bool // what Ask may call: true when the module has it

	// slots holds a token for every instance in use or being made; idle holds the others, so
	// at most Options.Instances exist. Instances are made on demand, since most modules are
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
	calls   int // calls made on it
}

func newModule(r *Runtime, spec Spec, compiled wazero.CompiledModule, initialize bool) *Module {
	// No files, environment or real clocks: wazero's defaults are the sandbox. A name in argv
	// because Go programs index os.Args[0] at startup (package flag does).
	config := wazero.NewModuleConfig().WithName("").WithArgs("hangar-module").WithStartFunctions()
	if initialize {
		config = config.WithStartFunctions(initializeExport)
	}
	has := compiled.ExportedFunctions()
	exports := make(map[string]bool, len(spec.Exports)+len(spec.Optional))
	for name := range spec.Exports {
		exports[name] = true
	}
	for name := range spec.Optional {
		_, exports[name] = has[name]
	}
	m := &Module{
		rt:       r,
		compiled: compiled,
		config:   config,
		kind:     spec.Kind,
		exports:  exports,
		slots:    make(chan struct{}, r.opts.Instances),
		idle:     make(chan *instance, r.opts.Instances),
	}
	m.SetName(spec.Name)
	return m
}

// Name is the module's name in messages.
func (m *Module) Name() string { return *m.name.Load() }

// SetName names the module in messages from now on, for a module that tells its name only
// when first called.
func (m *Module) SetName(name string) { m.name.Store(&name) }

// Exports reports whether the module has export, one of its Spec's.
func (m *Module) Exports(export string) bool { return m.exports[export] }

// Errorf is an *Error of kind about export of the module, for checks of the module's owner.
func (m *Module) Errorf(kind error, export, format string, args ...any) *Error {
	return &Error{Kind: m.kind, Module: m.Name(), Export: export, Err: kind, Reason: fmt.Sprintf(format, args...)}
}

// Close frees the module's instances and compiled code; calls in flight finish on theirs.
// Closing twice is harmless.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		// The compiled code is counted per module content in the runtime: closing it twice
		// would take it from another Module of the same bytes.
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var errs []error
	for len(m.idle) > 0 {
		errs = append(errs, (<-m.idle).mod.Close(ctx))
	}
	m.mu.Unlock()
	errs = append(errs, m.compiled.Close(ctx))
	return errors.Join(errs...)
}

// Call sends req, encoded as JSON, to export on a free instance and returns the "ok" of the
// answer; an "error" answer is an ErrRefused.
func (m *Module) Call(ctx context.Context, export string, req any) (json.RawMessage, error) {
	return Ask(ctx, m, export, req, func(*json.RawMessage) error { return nil })
}

// Ask calls export on a free instance with req encoded as JSON (nil for none: a func() -> i64
// export) and decodes the "ok" of its answer into a T that check accepts; an "error" answer is
// an ErrRefused, a T that check refuses an ErrBadAnswer.
func Ask[T any](ctx context.Context, m *Module, export string, req any, check func(*T) error) (T, error) {
	var zero T
	has, known := m.exports[export]
	if !known {
		return zero, fmt.Errorf("%s: %s is not one of its exports", where(m.kind, m.Name(), ""), export)
	}
	if !has {
		return zero, m.Errorf(ErrNotExported, export, "is not exported")
	}
	inst, err := m.acquire(ctx)
	if err != nil {
		return zero, err
	}
	res, err := answer(ctx, m, inst, export, req, check)
	// A refusal is a well-formed answer; anything else may have left the instance broken
	// (a Go guest that trapped has a runtime in an unknown state), so it goes.
	m.release(inst, err == nil || errors.Is(err, ErrRefused))
	return res, err
}

// CallI32 calls export, a func() -> i32, on a free instance: a module's version, say.
func (m *Module) CallI32(ctx context.Context, export string) (int32, error) {
	inst, err := m.acquire(ctx)
	if err != nil {
		return 0, err
	}
	callCtx, cancel := context.WithTimeout(ctx, m.rt.opts.CallTimeout)
	defer cancel()
	inst.stderr.reset()
	fn := inst.export(export)
	if fn == nil {
		m.release(inst, true)
		return 0, m.Errorf(ErrNotExported, export, "is not exported")
	}
	res, err := fn.Call(callCtx)
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%d results, want 1", len(res))
	}
	if err != nil {
		err = m.failure(ctx, callCtx, inst, export, err)
		m.release(inst, false)
		return 0, err
	}
	m.release(inst, true)
	return int32(res[0]), nil
}

// acquire takes an idle instance or makes one, waiting while Options.Instances are in use.
func (m *Module) acquire(ctx context.Context) (*instance, error) {
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: waiting for a free instance: %w", where(m.kind, m.Name(), ""), ctx.Err())
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		<-m.slots
		return nil, m.Errorf(ErrClosed, "", "the module is closed")
	}
	select {
	case inst := <-m.idle:
		return inst, nil
	default:
	}
	inst, err := m.instantiate(ctx)
	if err != nil {
		<-m.slots
		return nil, err
	}
	return inst, nil
}

// release pools a healthy instance and closes any other, and one past its life's bounds
// (Options.RecycleMemoryBytes and RecycleCalls).
func (m *Module) release(inst *instance, healthy bool) {
	inst.calls++
	spent := inst.calls >= m.rt.opts.RecycleCalls
	if mem := inst.mod.Memory(); mem != nil && uint64(mem.Size()) >= m.rt.opts.RecycleMemoryBytes {
		spent = true
	}
	m.mu.Lock()
	if healthy && !spent && !m.closed {
		m.idle <- inst
	} else {
		// Closing an instance frees its memory; the only error is about that instance, which
		// is gone either way.
		_ = inst.mod.Close(context.Background())
	}
	m.mu.Unlock()
	<-m.slots
}

func (m *Module) instantiate(ctx context.Context) (*instance, error) {
	if m.rt.closed.Load() {
		return nil, m.Errorf(ErrClosed, "", "the wasm runtime is closed")
	}
	inst := &instance{exports: make(map[string]api.Function, len(m.exports)+1)}
	callCtx, cancel := context.WithTimeout(ctx, m.rt.opts.InstantiateTimeout)
	defer cancel()
	mod, err := m.rt.wz.InstantiateModule(callCtx, m.compiled, m.config.WithStderr(&inst.stderr))
	if err != nil {
		return nil, m.failure(ctx, callCtx, inst, initializeExport, fmt.Errorf("instantiate: %w", err))
	}
	inst.mod = mod
	return inst, nil
}

// export is the function name of inst, looked up on first use: each lookup builds a new call
// engine.
func (inst *instance) export(name string) api.Function {
	fn, ok := inst.exports[name]
	if !ok {
		fn = inst.mod.ExportedFunction(name)
		inst.exports[name] = fn
	}
	return fn
}

// answer calls export on inst with req (nil for none) and reads its answer into a checked T.
func answer[T any](ctx context.Context, m *Module, inst *instance, export string, req any, check func(*T) error) (T, error) {
	var res T
	callCtx, cancel := context.WithTimeout(ctx, m.rt.opts.CallTimeout)
	defer cancel()
	inst.stderr.reset()
	var params []uint64
	if req != nil {
		body, err := encode(req)
		if err != nil {
			return res, fmt.Errorf("%s: encode request: %w", where(m.kind, m.Name(), export), err)
		}
		ptr, err := m.write(ctx, callCtx, inst, body)
		if err != nil {
			return res, err
		}
		params = []uint64{uint64(ptr), uint64(len(body))}
	}
	out, err := inst.export(export).Call(callCtx, params...)
	if err != nil {
		return res, m.failure(ctx, callCtx, inst, export, err)
	}
	ptr, size := uint32(out[0]>>32), uint32(out[0])
	if size > uint32(m.rt.opts.MaxReplyBytes) {
		return res, m.Errorf(ErrBadAnswer, export, "answered %d bytes, more than the %d allowed", size, m.rt.opts.MaxReplyBytes)
	}
	// The view stays valid while this call owns inst, and decoding copies what it keeps.
	reply, ok := inst.mod.Memory().Read(ptr, size)
	if !ok {
		return res, m.Errorf(ErrBadAnswer, export, "answered (%#x, %d), outside its %d bytes of memory", ptr, size, inst.mod.Memory().Size())
	}
	refusal, err := DecodeReply(reply, &res)
	if err != nil {
		return res, m.Errorf(ErrBadAnswer, export, "answered %s", err)
	}
	if refusal != "" {
		return res, m.Errorf(ErrRefused, export, "refused: %s", refusal)
	}
	if err := check(&res); err != nil {
		return res, m.Errorf(ErrBadAnswer, export, "answered %s", err)
	}
	return res, nil
}

// Raw is a request written into the module's buffer as it is, not encoded as JSON.
type Raw []byte

// encode is a request's bytes: Raw as it is, anything else as JSON.
func encode(req any) ([]byte, error) {
	if raw, ok := req.(Raw); ok {
		return raw, nil
	}
	return json.Marshal(req)
}

// write puts a request into a buffer the module allocates for it.
func (m *Module) write(ctx, callCtx context.Context, inst *instance, body []byte) (uint32, error) {
	if uint64(len(body)) > min(m.rt.opts.MemoryLimitBytes, math.MaxInt32) {
		return 0, m.Errorf(ErrMemory, ExportAlloc, "a request of %d bytes does not fit in %d bytes of memory", len(body), m.rt.opts.MemoryLimitBytes)
	}
	res, err := inst.export(ExportAlloc).Call(callCtx, uint64(len(body)))
	if err != nil {
		return 0, m.failure(ctx, callCtx, inst, ExportAlloc, err)
	}
	ptr := uint32(res[0])
	if !inst.mod.Memory().Write(ptr, body) {
		return 0, m.Errorf(ErrBadAnswer, ExportAlloc, "handed out %d bytes at %#x, outside its %d bytes of memory", len(body), ptr, inst.mod.Memory().Size())
	}
	return ptr, nil
}

// failure explains an error of a call into inst under callCtx, derived from the caller's ctx.
func (m *Module) failure(ctx, callCtx context.Context, inst *instance, export string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", where(m.kind, m.Name(), export), ctx.Err())
	}
	if m.rt.closed.Load() {
		return m.Errorf(ErrClosed, export, "the wasm runtime closed during the call")
	}
	if exit, ok := errors.AsType[*sys.ExitError](err); (ok && exit.ExitCode() == sys.ExitCodeDeadlineExceeded) || callCtx.Err() != nil {
		limit := m.rt.opts.CallTimeout
		if export == initializeExport {
			limit = m.rt.opts.InstantiateTimeout
		}
		return m.Errorf(ErrTimeout, export, "ran past its %s deadline", limit)
	}
	// The message keeps the first line of each report; the detail keeps them whole, wasm
	// stack trace and all, for the logs of whoever debugs the module.
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
	if strings.Contains(stderr, "out of memory") || (inst.mod != nil && uint64(inst.mod.Memory().Size()) >= m.rt.opts.MemoryLimitBytes) {
		kind, reason = ErrMemory, fmt.Sprintf("exhausted its %d MiB of memory: ", m.rt.opts.MemoryLimitBytes>>20)
	}
	e := m.Errorf(kind, export, "%s%s", reason, summary)
	e.Detail = detail
	return e
}

// reply is every answer of the calling convention: harnesses/abi's Reply, decoded strictly.
type reply struct {
	OK    json.RawMessage `json:"ok,omitempty"`
	Error string          `json:"error,omitempty"`
}

// DecodeReply reads an answer of the calling convention into result, or returns the module's
// refusal. It is strict — unknown fields, trailing data, both or neither of ok and error are
// lies about the convention, not things to skip — because a module that answers what it did
// not mean to must fail loudly.
func DecodeReply(answer []byte, result any) (refusal string, err error) {
	if len(answer) == 0 {
		return "", errors.New("nothing")
	}
	var r reply
	if err := decodeStrict(answer, &r); err != nil {
		return "", fmt.Errorf("a reply that is not strict ABI JSON: %w", err)
	}
	hasOK := len(r.OK) > 0 && !bytes.Equal(r.OK, []byte("null"))
	switch {
	case hasOK && r.Error != "":
		return "", errors.New(`a reply with both "ok" and "error"`)
	case r.Error != "":
		return r.Error, nil
	case !hasOK:
		return "", errors.New(`a reply with neither "ok" nor "error"`)
	}
	if err := decodeStrict(r.OK, result); err != nil {
		return "", fmt.Errorf("an ok that does not decode into %T: %w", result, err)
	}
	return "", nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// stderrCapture keeps the start of what an instance writes to stderr during one call: a Go
// guest's panic message and stack are there, and a module that logs a lot must not cost the
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
