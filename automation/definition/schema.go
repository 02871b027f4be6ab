package definition

import (
	"slices"
	"time"
)

// FieldKind says what a block field holds, and so how it is checked, rendered and documented.
type FieldKind string

// Field kinds. Kinds marked "template" may hold `{{ expr }}` anywhere in their strings; a kind
// with a fixed form (enum, duration, time, url, bool) may instead be one template, and its form is
// then checked on the rendered value.
const (
	KindText       FieldKind = "text"        // a string (template)
	KindURL        FieldKind = "url"         // an absolute http or https URL (template)
	KindEnum       FieldKind = "enum"        // one of the field's Enum values (template)
	KindDuration   FieldKind = "duration"    // a Go duration such as "90s" or "5m", up to Max (template)
	KindTime       FieldKind = "time"        // an RFC 3339 timestamp (template)
	KindBool       FieldKind = "bool"        // true or false, or a template giving one
	KindTextMap    FieldKind = "text_map"    // an object of strings (template values)
	KindJSON       FieldKind = "json"        // any JSON; each string inside is a template
	KindStatusList FieldKind = "status_list" // a list of HTTP status codes
	KindSecretMap  FieldKind = "secret_map"  // an object of header → org secret name; never rendered
	KindCondition  FieldKind = "condition"   // a CEL expression giving a bool; not a template
	KindScript     FieldKind = "script"      // a JavaScript function body; not a template
)

// Rendered reports whether the field's strings are templates rendered before the block runs.
func (k FieldKind) Rendered() bool {
	switch k {
	case KindSecretMap, KindCondition, KindScript:
		return false
	}
	return true
}

// FieldSpec is one field of a block type.
type FieldSpec struct {
	Name        string
	Kind        FieldKind
	Description string
	Required    bool
	Enum        []string      // KindEnum
	Default     any           // what an absent field means; nil when absence means nothing
	Max         time.Duration // KindDuration
}

// BlockSpec is one block type: its catalog entry and its fields.
type BlockSpec struct {
	Type        string
	Label       string
	Description string
	Fields      []FieldSpec
	// OneOf, when set, names fields of which exactly one must be given.
	OneOf []string
	// rule checks what spans several fields; it sees the fields as written (templates unrendered
	// when rendered is false).
	rule func(fields map[string]any, rendered bool) []fieldProblem
}

// Field returns the named field's spec.
func (s BlockSpec) Field(name string) (FieldSpec, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return FieldSpec{}, false
}

// Limits of block fields.
const (
	MaxHTTPTimeout = 60 * time.Second
	MaxDelay       = 24 * time.Hour
	MaxTaskWait    = 24 * time.Hour
)

// DefaultSessionHandle is the instance handle a prompt block writes to when it names no session.
const DefaultSessionHandle = "session"

// InstanceOpen, InstanceWriteHandle and InstanceClose are the actions of an instance block.
const (
	InstanceOpen        = "open"
	InstanceWriteHandle = "write_handle"
	InstanceClose       = "close"
)

// blockSpecs is the one table of block types: validation, the action catalog (ActionSchemas)
// and the block reference (BlockReference) all read it.
//
//   - filter: condition (CEL, required). False ends the run as filtered.
//   - code: source (a JavaScript function body, required). Its return value is the output.
//   - http: method (GET, POST, PUT, PATCH, DELETE; default GET), url (required, http or https),
//     headers and query (objects of strings), body (any JSON; a string is sent as is),
//     secret_headers (header → org secret name: by reference, never rendered or shown),
//     expect_status (list of codes; default any 2xx), timeout (duration, default 30s, ≤ 60s).
//   - task: profile_id and prompt (required), title, harness, model, model_router, effort,
//     wait (default false), timeout (≤ 24h, only with wait).
//   - prompt: prompt (required), session_id (default: the instance's "session" handle, which
//     then needs instances), wait.
//   - instance: action (open, write_handle, close; required), handle and value (write_handle
//     only, both required), reason (close only). Needs the definition's instance.key.
//   - delay: exactly one of duration (≤ 24h) and until (RFC 3339).
var blockSpecs = []BlockSpec{
	{
		Type:        BlockFilter,
		Label:       "Filter",
		Description: "Ends the run as filtered when its condition is false.",
		Fields: []FieldSpec{
			{Name: "condition", Kind: KindCondition, Required: true,
				Description: "CEL over event, inputs, steps, instance and now, giving a bool."},
		},
	},
	{
		Type:        BlockCode,
		Label:       "Code",
		Description: "Runs JavaScript in a sandbox; what it returns is the step's output.",
		Fields: []FieldSpec{
			{Name: "source", Kind: KindScript, Required: true,
				Description: "A JavaScript function body; event, inputs, steps, instance and now are in scope."},
		},
	},
	{
		Type:        BlockHTTP,
		Label:       "HTTP request",
		Description: "Sends one request to an allow-listed host; the response is the step's output.",
		Fields: []FieldSpec{
			{Name: "method", Kind: KindEnum, Enum: []string{"GET", "POST", "PUT", "PATCH", "DELETE"}, Default: "GET",
				Description: "The request method."},
			{Name: "url", Kind: KindURL, Required: true, Description: "The request URL; its host must be allow-listed."},
			{Name: "headers", Kind: KindTextMap, Description: "Request headers."},
			{Name: "query", Kind: KindTextMap, Description: "Query parameters added to the URL."},
			{Name: "body", Kind: KindJSON, Description: "The body: a string is sent as is, anything else as JSON."},
			{Name: "secret_headers", Kind: KindSecretMap,
				Description: "Headers whose values are org secrets, by secret name; never rendered or shown."},
			{Name: "expect_status", Kind: KindStatusList,
				Description: "Statuses that count as success; by default any 2xx."},
			{Name: "timeout", Kind: KindDuration, Max: MaxHTTPTimeout, Default: "30s",
				Description: "How long to wait for the response, up to 60s."},
		},
	},
	{
		Type:        BlockTask,
		Label:       "Start task",
		Description: "Starts a task with a profile and a prompt, and waits for it when asked.",
		Fields: []FieldSpec{
			{Name: "profile_id", Kind: KindText, Required: true, Description: "The profile the task runs with."},
			{Name: "prompt", Kind: KindText, Required: true, Description: "The task's first prompt."},
			{Name: "title", Kind: KindText, Description: "The task's title."},
			{Name: "harness", Kind: KindText, Description: "The harness; by default the profile's."},
			{Name: "model", Kind: KindText, Description: "The model; by default the profile's."},
			{Name: "model_router", Kind: KindText, Description: "The model router; by default the profile's."},
			{Name: "effort", Kind: KindText, Description: "The effort level; by default the profile's."},
			{Name: "wait", Kind: KindBool, Default: false, Description: "Wait for the task to finish before the next block."},
			{Name: "timeout", Kind: KindDuration, Max: MaxTaskWait,
				Description: "How long to wait when wait is true, up to 24h."},
		},
		rule: timeoutNeedsWait,
	},
	{
		Type:        BlockPrompt,
		Label:       "Prompt session",
		Description: "Sends a prompt to a session, by default the current instance's session.",
		Fields: []FieldSpec{
			{Name: "prompt", Kind: KindText, Required: true, Description: "The prompt."},
			{Name: "session_id", Kind: KindText,
				Description: `The session; by default the one in the instance's "session" handle.`},
			{Name: "wait", Kind: KindBool, Default: false, Description: "Wait for the agent's turn to end."},
		},
	},
	{
		Type:        BlockInstance,
		Label:       "Instance",
		Description: "Opens the current instance, writes one of its handles, or closes it.",
		Fields: []FieldSpec{
			{Name: "action", Kind: KindEnum, Required: true, Enum: []string{InstanceOpen, InstanceWriteHandle, InstanceClose},
				Description: "What to do with the instance."},
			{Name: "handle", Kind: KindText, Description: "The handle's name, for write_handle."},
			{Name: "value", Kind: KindJSON, Description: "The handle's value, for write_handle."},
			{Name: "reason", Kind: KindText, Description: "Why the instance closes, for close."},
		},
		rule: instanceActionFields,
	},
	{
		Type:        BlockDelay,
		Label:       "Delay",
		Description: "Waits for a duration or until a time before the next block.",
		Fields: []FieldSpec{
			{Name: "duration", Kind: KindDuration, Max: MaxDelay, Description: "How long to wait, up to 24h."},
			{Name: "until", Kind: KindTime, Description: "When to continue (RFC 3339); not more than 24h ahead."},
		},
		OneOf: []string{"duration", "until"},
	},
}

// Blocks lists the block types.
func Blocks() []BlockSpec { return blockSpecs }

// LookupBlock returns the spec of a block type.
func LookupBlock(typ string) (BlockSpec, bool) {
	for _, s := range blockSpecs {
		if s.Type == typ {
			return s, true
		}
	}
	return BlockSpec{}, false
}

func timeoutNeedsWait(fields map[string]any, _ bool) []fieldProblem {
	if _, ok := fields["timeout"]; ok && fields["wait"] == false {
		return []fieldProblem{{path: []any{"timeout"}, code: CodeInvalid, msg: "timeout applies only when wait is true"}}
	}
	return nil
}

func instanceActionFields(fields map[string]any, rendered bool) []fieldProblem {
	action, _ := fields["action"].(string)
	if hasTemplate(action, rendered) {
		return nil
	}
	allowed, known := map[string][]string{
		InstanceOpen:        nil,
		InstanceWriteHandle: {"handle", "value"},
		InstanceClose:       {"reason"},
	}[action]
	if !known {
		return nil // the action's own check reports it
	}
	var out []fieldProblem
	for _, name := range []string{"handle", "value", "reason"} {
		_, present := fields[name]
		switch {
		case present && !slices.Contains(allowed, name):
			out = append(out, fieldProblem{path: []any{name}, code: CodeInvalid, msg: name + " does not apply to action " + action})
		case !present && name != "reason" && slices.Contains(allowed, name):
			out = append(out, fieldProblem{path: []any{name}, code: CodeRequired, msg: name + " is required for action " + action})
		}
	}
	if h, ok := fields["handle"].(string); ok && !hasTemplate(h, rendered) && !idPattern.MatchString(h) {
		out = append(out, fieldProblem{path: []any{"handle"}, code: CodeInvalid, msg: "a handle name is " + idShape})
	}
	return out
}
