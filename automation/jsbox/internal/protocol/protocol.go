// Package protocol is what jsbox's host and its WebAssembly guest say to each other: one export
// that takes a Request and answers a Response inside an abi.Reply, following the harness
// plugins' calling convention (see harnesses/abi), and the limits both sides enforce. It depends
// on the standard library only, since it is built for GOOS=wasip1 too.
package protocol

import "encoding/json"

// ExportEval is the guest's export: func(ptr i32, len i32) -> i64, a Request in, a Response out.
const ExportEval = "jsbox_eval"

// Limits of one evaluation. The host checks what it sends (source, vars), the guest what it
// produces (result, logs) and how deep scripts may call.
const (
	MaxSourceBytes = 256 << 10
	MaxVarsBytes   = 1 << 20 // all values together, as JSON
	MaxResultBytes = 1 << 20 // the result as JSON
	MaxLogLines    = 1000
	MaxLogBytes    = 64 << 10
	// MaxCallDepth is how deep JavaScript calls may nest before a RangeError.
	MaxCallDepth = 1000
)

// Names of the script errors that are not JavaScript's own.
const (
	ErrorTimeout   = "TimeoutError"
	ErrorMemory    = "MemoryLimitError"
	ErrorSizeLimit = "SizeLimitError"
	// ErrorInternal is a failure of the engine rather than of the script: a bug to report.
	ErrorInternal = "InternalError"
)

// Request is one evaluation.
type Request struct {
	Source string                     `json:"source"`
	Vars   map[string]json.RawMessage `json:"vars,omitempty"`
	// MemoryLimitBytes is the instance's memory cap, so the guest's garbage collector can work
	// harder as the script's heap nears it instead of growing memory past it.
	MemoryLimitBytes int64 `json:"memory_limit_bytes"`
}

// Response is what an evaluation gave: Value (JSON, absent for undefined) or Error, and Logs.
type Response struct {
	Value json.RawMessage `json:"value,omitempty"`
	Logs  []string        `json:"logs,omitempty"`
	Error *Error          `json:"error,omitempty"`
}

// Error is what went wrong in the script.
type Error struct {
	Name    string `json:"name"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"` // 1-based in the script's source; 0 when unknown
}
