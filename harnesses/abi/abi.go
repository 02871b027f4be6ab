// Package abi is the contract between Hangar and a harness plugin: a WebAssembly module (WASI
// preview 1, reactor) that describes a coding-agent harness, plans how to launch it in a
// sandbox, and parses its output into session events. Both sides import this package — the host
// (harnesses/harness, on runtimes/wasm) and plugins written with the SDK (harnesses/sdk) — so it depends on nothing
// but the standard library and builds for GOOS=wasip1.
//
// # Version 1
//
// A plugin module exports:
//
//	hangar_abi_version() -> i32          Version; a module exporting another is refused
//	hangar_alloc(size i32) -> i32        a buffer of size bytes in the module's memory, owned
//	                                     by the host until the next call into the module
//	hangar_describe() -> i64             -> Descriptor
//	hangar_plan(ptr i32, len i32) -> i64  PlanRequest -> Plan
//	hangar_parse(ptr i32, len i32) -> i64 ParseRequest -> ParseResult
//
// and may export (optional; a module without them still speaks version 1):
//
//	hangar_tool_result(ptr i32, len i32) -> i64  ToolResultRequest -> ToolResult
//	hangar_parse_raw(ptr i32, len i32) -> i64    ParseRequest -> ParseResult, the chunk raw
//
// Requests are JSON written by the host into a buffer from hangar_alloc; an answer is JSON in
// the module's memory, returned as (ptr << 32 | len), and is a Reply: exactly one of "ok" (the
// result) and "error" (a message for the caller). A module may export _initialize (Go's
// c-shared wasip1 build does), which the host runs once per instance. It gets WASI with no
// files, no environment, no network and a clock that does not reveal the host's time; each call
// runs under a CPU deadline and the instance under a memory cap. A call that traps, runs past
// its deadline, exhausts its memory or answers what this package does not describe is an error
// for that call; the host discards the instance and stays up.
//
// Plugins are pure: the same request gives the same answer, and parse carries what it needs
// between chunks of output in ParseResult.State, which the host hands back with the next chunk.
// So the host may run any call on any instance of the module.
//
// # Output in whole lines, and raw
//
// The host hands a run's output to parse in whole lines: a chunk ends with a newline, but for
// the last of a stream and the pieces of a line longer than the host carries (32 MiB). A module
// that exports hangar_parse_raw is handed chunks through it instead of hangar_parse: its request
// is the ParseRequest as JSON without Chunk, a newline, then the chunk's bytes as they are, so
// that neither side encodes output as a JSON string. Its answer is hangar_parse's. Chunks are
// never cut inside a UTF-8 character, but output that is not UTF-8 reaches a raw parser as it
// is. hangar_parse_raw was added to version 1 without changing it.
//
// # Client-side tools
//
// A harness may wait, mid-turn, for the API's client to answer a tool call (CompleteToolCall).
// Its plan sets Plan.KeepStdin, so stdin stays open after Plan.Stdin is written (the host closes
// it when the turn ends or is interrupted); its parser reports each such call as a tool.call
// with Event.Client set; and the module exports hangar_tool_result, which turns the client's
// result into the bytes the host writes to the harness's stdin. It gets the parse state of the
// turn and may return a new one. A harness whose module lacks the export takes no client tool
// results: the host refuses them before asking it anything. These fields were added to
// version 1 without changing it: a plugin that knows nothing of them never sets them, and the
// host's strict decoding of answers accepts them.
//
// # Credentials
//
// A session created with an OAuth credential (CreateSession's oauth_credential, for the
// provider the descriptor's Auth.UserOAuth names) hands its bundle to every plan as
// PlanRequest.Credential, opaque to Hangar: the plugin delivers it the way its harness reads
// it, as an environment variable of the plan or as a file marked Secret. The host places a
// secret file's content under SecretDir and, at the file's Path, a symbolic link to it, so the
// harness finds it where it looks while snapshots and artifacts carry only the link. Requests
// carrying a credential are never logged. Credential and Secret were added to version 1 without
// changing it, as the client-side tool fields were.
//
// # Usage
//
// A usage event is what the turn's run cost, that run alone: a harness that prints the whole
// conversation's totals on a resumed turn (as Claude Code and Codex do) has its parser report
// what they add to the totals of the turn before, which it carries in its resume hint
// (Event.Resume of turn.done, handed back as ParseRequest.Resume). Usage's cache fields and
// ParseRequest.Resume were added to version 1 without changing it.
//
// # Subagents and commands
//
// Event.ParentToolCallID ties a subagent's events to the tool call that started the subagent,
// and Event.ExitCode keeps a command's exit status on its tool.result. Both were added to
// version 1 without changing it, as the fields above were.
//
// JSON field names follow the API's (svc.app.v1.HarnessDescriptor for Descriptor), so a
// descriptor is read by the host as the API message itself.
package abi

import "encoding/json"

// Version is the ABI version this package describes.
const Version = 1

// Exported function names.
const (
	ExportVersion  = "hangar_abi_version"
	ExportAlloc    = "hangar_alloc"
	ExportDescribe = "hangar_describe"
	ExportPlan     = "hangar_plan"
	ExportParse    = "hangar_parse"
	// ExportToolResult is optional; see "Client-side tools".
	ExportToolResult = "hangar_tool_result"
	// ExportParseRaw is optional; see "Output in whole lines, and raw".
	ExportParseRaw = "hangar_parse_raw"
)

// Reply is every answer of a plugin: exactly one of OK and Error.
type Reply struct {
	OK    json.RawMessage `json:"ok,omitempty"`
	Error string          `json:"error,omitempty"`
}

// Descriptor says what a harness is and what it offers; it is svc.app.v1.HarnessDescriptor.
type Descriptor struct {
	Name            string   `json:"name"`
	Label           string   `json:"label,omitempty"`
	Description     string   `json:"description,omitempty"`
	Auth            *Auth    `json:"auth,omitempty"`
	Models          []Option `json:"models,omitempty"`
	Effort          []Option `json:"effort,omitempty"`
	Egress          *Egress  `json:"egress,omitempty"`
	Modes           []Mode   `json:"modes,omitempty"`
	RouterProtocols []string `json:"router_protocols,omitempty"`
	NativeEgress    *Egress  `json:"native_egress,omitempty"`
}

// Auth names the environment variables a harness reads its credentials from.
type Auth struct {
	OrgEnv      string `json:"org_env,omitempty"`
	UserEnv     string `json:"user_env,omitempty"`
	OrgEnvHint  string `json:"org_env_hint,omitempty"`
	UserEnvHint string `json:"user_env_hint,omitempty"`
	UserOAuth   *OAuth `json:"user_oauth,omitempty"`
}

// OAuth is the OAuth provider whose credential bundle a harness can use.
type OAuth struct {
	Provider string `json:"provider"`
	Delivery string `json:"delivery,omitempty"` // "OAUTH_DELIVERY_OPAQUE_BUNDLE"
}

// Egress is the network a harness needs.
type Egress struct {
	AllowHosts        []string `json:"allow_hosts,omitempty"`
	AllowHostPatterns []string `json:"allow_host_patterns,omitempty"`
}

// Mode is one way a harness can run (e.g. "plan", "auto-edit").
type Mode struct {
	ID      string `json:"id"`
	Label   string `json:"label,omitempty"`
	Default bool   `json:"default,omitempty"`
}

// Option is a model or an effort level, with the environment it sets.
type Option struct {
	ID      string            `json:"id"`
	Label   string            `json:"label,omitempty"`
	Default bool              `json:"default,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// PlanRequest asks how to run one prompt.
type PlanRequest struct {
	Prompt string            `json:"prompt"`
	Model  string            `json:"model,omitempty"`
	Effort string            `json:"effort,omitempty"`
	Mode   string            `json:"mode,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Resume is what an earlier turn's events reported for continuing its conversation (e.g.
	// Claude Code's session id), "" for a first turn.
	Resume string `json:"resume,omitempty"`
	// Credential is the session's OAuth credential bundle for the provider the descriptor's
	// Auth.UserOAuth names, as the subject stored it ("" without one); see "Credentials".
	Credential string `json:"credential,omitempty"`
}

// Plan is how to launch the harness for one prompt in the sandbox.
type Plan struct {
	Argv  []string          `json:"argv"`
	Env   map[string]string `json:"env,omitempty"`
	Files []File            `json:"files,omitempty"`
	Stdin string            `json:"stdin,omitempty"`
	// Workdir is where to run, "" for the sandbox's default.
	Workdir string `json:"workdir,omitempty"`
	// KeepStdin keeps stdin open after Stdin is written, for the tool results the host writes
	// later (ToolResult.Stdin); the host closes it when the turn ends or is interrupted.
	KeepStdin bool `json:"keep_stdin,omitempty"`
}

// File is a file to place in the sandbox before launching.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    uint32 `json:"mode,omitempty"` // permission bits; 0 means 0644
	// Secret marks a file holding a credential: the host keeps its content off the sandbox's
	// disk (see "Credentials").
	Secret bool `json:"secret,omitempty"`
}

// SecretDir is where, inside the sandbox, the host keeps the contents of secret files: a
// directory outside the sandbox's copy-on-write disk, so no snapshot, artifact or file read
// carries them, and gone with the sandbox.
const SecretDir = "/.hangar/run/secrets"

// ParseRequest hands the plugin the next chunk of the harness's output.
type ParseRequest struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Chunk  string `json:"chunk"`
	// State is the previous ParseResult.State of this run ("" first).
	State string `json:"state,omitempty"`
	// Final is set once, after the process exited, with ExitStatus; Chunk is then empty.
	Final      bool `json:"final,omitempty"`
	ExitStatus int  `json:"exit_status,omitempty"`
	// Resume is the run's PlanRequest.Resume ("" for a first turn), on every request of the
	// run: what the previous turn reported, so a parser can carry its totals (see "Usage").
	Resume string `json:"resume,omitempty"`
}

// ParseResult is what a chunk meant.
type ParseResult struct {
	Events []Event `json:"events,omitempty"`
	State  string  `json:"state,omitempty"`
}

// Event kinds a parser reports.
const (
	KindAssistantMessage = "assistant.message"
	KindToolCall         = "tool.call"
	KindToolResult       = "tool.result"
	KindUsage            = "usage"
	KindError            = "error"
	KindTurnDone         = "turn.done"
)

// Event is one normalized thing the harness did.
type Event struct {
	Kind string `json:"kind"`
	// Text is an assistant message's text, an error's message or a tool result's output.
	Text       string          `json:"text,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"` // a tool call's arguments
	IsError    bool            `json:"is_error,omitempty"`
	Usage      *Usage          `json:"usage,omitempty"`
	// Resume is the harness's own conversation id, for PlanRequest.Resume of the next turn.
	Resume string `json:"resume,omitempty"`
	// Client marks a tool.call the harness now waits for the API's client to answer
	// (CompleteToolCall with its ToolCallID); see "Client-side tools".
	Client bool `json:"client,omitempty"`
	// ParentToolCallID links an event of a subagent to the tool call of its parent agent that
	// started it ("" for the main agent's events).
	ParentToolCallID string `json:"parent_tool_call_id,omitempty"`
	// ExitCode is a command's exit status, on the tool.result of a tool that runs one and
	// reports it (nil when unknown).
	ExitCode *int `json:"exit_code,omitempty"`
}

// ToolResultRequest hands the plugin a client's result for a tool call it reported with Client.
type ToolResultRequest struct {
	ToolCallID string `json:"tool_call_id"`
	// ResultJSON is the client's result: valid JSON, checked by the host.
	ResultJSON string `json:"result_json"`
	// State is the run's parse state as the last ParseResult (or ToolResult) left it.
	State string `json:"state,omitempty"`
}

// ToolResult is how to deliver a client's tool result to the running harness.
type ToolResult struct {
	// Stdin is written to the harness's stdin (kept open by Plan.KeepStdin).
	Stdin string `json:"stdin"`
	// State replaces the run's parse state when not empty.
	State string `json:"state,omitempty"`
}

// Usage is what a turn cost. InputTokens counts the input tokens neither read from nor written
// to the prompt cache, which CacheReadTokens and CacheWriteTokens count: the four add up to the
// input the model was sent.
type Usage struct {
	InputTokens      int64   `json:"input_tokens,omitempty"`
	OutputTokens     int64   `json:"output_tokens,omitempty"`
	CacheReadTokens  int64   `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// Add is u and v summed.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		CostUSD: u.CostUSD + v.CostUSD,
	}
}

// Kinds lists the event kinds of version 1.
func Kinds() []string {
	return []string{KindAssistantMessage, KindToolCall, KindToolResult, KindUsage, KindError, KindTurnDone}
}
