package wasm

import (
	"errors"
	"strconv"
)

// What went wrong with a module, for errors.Is. Every error of this package about a module is an
// *Error wrapping one of these; a cancelled caller context is returned as the context's error
// instead, since the module did nothing wrong.
var (
	// ErrBadModule: the bytes are not wasm, lack an export or have a wrong signature, import
	// what the runtime does not provide, or (as the module's owner decides) speak another version.
	ErrBadModule = errors.New("not a module of the expected kind")
	// ErrTimeout: a call ran past Options.CallTimeout.
	ErrTimeout = errors.New("module ran past its deadline")
	// ErrMemory: the instance ran out of memory under Options.MemoryLimitBytes.
	ErrMemory = errors.New("module exhausted its memory")
	// ErrTrap: the module trapped or exited (a Go guest's panic exits).
	ErrTrap = errors.New("module trapped")
	// ErrBadAnswer: the answer breaks the calling convention — out of bounds, too large, not
	// strict JSON — or the check its caller gave.
	ErrBadAnswer = errors.New("module answered outside the calling convention")
	// ErrRefused: the module answered with an error of its own. Only this one is about the
	// request rather than the module.
	ErrRefused = errors.New("module refused the request")
	// ErrClosed: the Module or its Runtime was closed.
	ErrClosed = errors.New("module closed")
	// ErrNotExported: an optional export the module does not have.
	ErrNotExported = errors.New("module lacks the export")
)

// Error says which module and which export failed, and how.
type Error struct {
	Kind   string // what the module is, for people: Spec.Kind
	Module string // its name: Spec.Name, or the name given later with SetName
	Export string // the export called (or "_initialize"); "" for the module itself
	Err    error  // one of the Err… values of this package
	Reason string // what happened, in a line, for people
	// Detail is the engine's whole report of a trap — wasm stack trace and what the module
	// wrote to stderr — for logs; "" for other errors.
	Detail string
}

func (e *Error) Error() string { return where(e.Kind, e.Module, e.Export) + ": " + e.Reason }

func (e *Error) Unwrap() error { return e.Err }

// where names a module's export in messages.
func where(kind, module, export string) string {
	msg := kind
	if module != "" {
		msg += " " + strconv.Quote(module)
	}
	if export != "" {
		msg += " " + export
	}
	return msg
}
