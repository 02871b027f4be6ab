package harness

import (
	"errors"
	"strconv"
)

// What went wrong with a plugin, for errors.Is. Every error of this package about a plugin is a
// *PluginError wrapping one of these; a cancelled caller context is returned as the context's
// error instead, since the plugin did nothing wrong.
var (
	// ErrBadModule: the module is not wasm, lacks an export or has a wrong signature, imports
	// what the host does not provide, or speaks another ABI version.
	ErrBadModule = errors.New("not a harness plugin of this ABI")
	// ErrTimeout: a call ran past Options.CallTimeout.
	ErrTimeout = errors.New("harness plugin ran past its deadline")
	// ErrMemory: the instance ran out of memory under Options.MemoryLimitBytes.
	ErrMemory = errors.New("harness plugin exhausted its memory")
	// ErrTrap: the module trapped or exited (a Go guest's panic exits).
	ErrTrap = errors.New("harness plugin trapped")
	// ErrBadAnswer: the answer is not what the ABI describes — out of bounds, too large, not
	// strict JSON, or a result that breaks the rules (no argv, unknown event kind, …).
	ErrBadAnswer = errors.New("harness plugin answered outside the ABI")
	// ErrRefused: the plugin answered with an error of its own, e.g. an unknown model. Only this
	// one is about the request rather than the plugin.
	ErrRefused = errors.New("harness plugin refused the request")
	// ErrClosed: the Plugin or its Runtime was closed.
	ErrClosed = errors.New("harness plugin closed")
	// ErrNotExported: an optional export (abi.ExportToolResult) the module does not have.
	ErrNotExported = errors.New("harness plugin lacks the export")
)

// PluginError says which plugin and which export failed, and how.
type PluginError struct {
	Plugin string // the descriptor's name; "" until describe has answered
	Export string // the export called (abi.Export…, or "_initialize"); "" for the module itself
	Err    error  // one of the Err… values of this package
	Reason string // what happened, in a line, for people
	// Detail is the engine's whole report of a trap — wasm stack trace and what the plugin
	// wrote to stderr — for logs; "" for other errors.
	Detail string
}

func (e *PluginError) Error() string { return where(e.Plugin, e.Export) + ": " + e.Reason }

// where names a plugin's export in messages.
func where(plugin, export string) string {
	msg := "harness plugin"
	if plugin != "" {
		msg += " " + strconv.Quote(plugin)
	}
	if export != "" {
		msg += " " + export
	}
	return msg
}

func (e *PluginError) Unwrap() error { return e.Err }
