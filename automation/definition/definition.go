// Package definition is the shape of an automation (its `definition_json`, version 1): the
// entrypoints that start it, the inputs it declares, the blocks it runs and how events group into
// instances, plus its settings (`settings_json`). It parses and validates definitions and reports
// every problem as a BlockError naming the block and the field. It depends on nothing but the
// standard library and the expression and script checkers it is handed, so the engine, the
// services and the catalogs all read one shape.
package definition

import (
	"encoding/json"
	"slices"
)

// Version is the definition version this package reads and writes.
const Version = 1

// Definition is one version of an automation.
type Definition struct {
	Version     int          `json:"version"`
	Entrypoints []Entrypoint `json:"entrypoints"`
	Inputs      []Input      `json:"inputs,omitempty"`
	// Instance, when set, groups the events of an automation into long-lived instances.
	Instance *InstanceSpec `json:"instance,omitempty"`
	Blocks   []Block       `json:"blocks"`
}

// Entrypoint types.
const (
	EntrypointEvent    = "event"    // a provider event or an inbound webhook, by EventKey
	EntrypointSchedule = "schedule" // a cron schedule in a time zone
	EntrypointManual   = "manual"   // RunNow
)

// Entrypoint is one way a run starts.
type Entrypoint struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// EventKey names the event of an event entrypoint, e.g. "github.pull_request.opened" or
	// "webhook.<registration id>".
	EventKey string `json:"event_key,omitempty"`
	// Filter is a CEL condition over event, inputs and now; an event it rejects is counted as
	// filtered and starts no run.
	Filter string `json:"filter,omitempty"`
	// Cron (five fields, or a macro such as @daily) and TimeZone (IANA; default the settings' time zone, then UTC) make a
	// schedule entrypoint.
	Cron     string `json:"cron,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// Input types.
const (
	InputString  = "string"
	InputNumber  = "number"
	InputBoolean = "boolean"
	InputObject  = "object"
	InputArray   = "array"
)

// Input is one declared input; `inputs_json` is an object of them by Key.
type Input struct {
	Key         string          `json:"key"`
	Type        string          `json:"type"`
	Label       string          `json:"label,omitempty"`
	Description string          `json:"description,omitempty"`
	Required    bool            `json:"required,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
	// Noun names what the input picks (e.g. "profile", "repo"), for ListInputKeyOptions.
	Noun string `json:"noun,omitempty"`
}

// InstanceSpec routes events to instances.
type InstanceSpec struct {
	// Key is a CEL expression over event and inputs giving the instance key (a string); events
	// with the same key share one AutomationInstance.
	Key string `json:"key"`
}

// Block types.
const (
	BlockFilter   = "filter"
	BlockCode     = "code"
	BlockHTTP     = "http"
	BlockTask     = "task"
	BlockPrompt   = "prompt"
	BlockInstance = "instance"
	BlockDelay    = "delay"
)

// Block is one step. Its own fields (Fields) depend on its Type; every string among them may hold
// `{{ expr }}` templates.
type Block struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Needs lists blocks that must finish first. Without it a block follows the one before.
	Needs []string `json:"needs,omitempty"`
	// Retry overrides the settings' retry policy for this block.
	Retry *Retry `json:"retry,omitempty"`
	// Fields are the type's fields, e.g. {"condition": "..."} for a filter.
	Fields map[string]any `json:"-"`
}

// Retry is how often and how patiently a failed step is tried again.
type Retry struct {
	// MaxAttempts counts the first try; 1 means no retry.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Backoff is the first wait (a Go duration, e.g. "2s"), doubled after each failure.
	Backoff string `json:"backoff,omitempty"`
}

// Settings are an automation's `settings_json`.
type Settings struct {
	// ConcurrencyLimit caps the runs in progress at once; 0 means the deployment default.
	ConcurrencyLimit int `json:"concurrency_limit,omitempty"`
	// DedupeWindow is how long a body delivered under an unsigned delivery key (GitHub's)
	// counts as delivered, so a replay under a new key starts no run (a Go duration; 24h by
	// default). Delivery keys themselves are remembered for good.
	DedupeWindow string `json:"dedupe_window,omitempty"`
	TimeZone     string `json:"time_zone,omitempty"`
	Retry        *Retry `json:"retry,omitempty"`
}

// BlockError is one problem of a definition, a rendering or a run; BlockID is "" for a problem
// outside blocks (then Field says where, e.g. "entrypoints[0].cron").
type BlockError struct {
	BlockID string `json:"block_id"`
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e BlockError) Error() string {
	where := e.Field
	if e.BlockID != "" {
		where = "block " + e.BlockID + ": " + where
	}
	return where + ": " + e.Message
}

// blockKeys are the JSON keys of Block that are not its Fields.
var blockKeys = map[string]bool{"id": true, "type": true, "needs": true, "retry": true}

// UnmarshalJSON reads the common keys and keeps every other key in Fields.
func (b *Block) UnmarshalJSON(data []byte) error {
	type common Block
	var c common
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	var all map[string]any
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	for k := range blockKeys {
		delete(all, k)
	}
	*b = Block(c)
	b.Fields = all
	return nil
}

// MarshalJSON writes the common keys and Fields as one object.
func (b Block) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(b.Fields)+4)
	for k, v := range b.Fields {
		out[k] = v
	}
	out["id"] = b.ID
	out["type"] = b.Type
	if len(b.Needs) > 0 {
		out["needs"] = b.Needs
	}
	if b.Retry != nil {
		out["retry"] = b.Retry
	}
	return json.Marshal(out)
}

// SecretNames lists the org secrets d's blocks name (the values of their secret-map fields,
// such as http blocks' secret_headers), sorted, each once: what an access check of the
// automation's owner must cover.
func (d Definition) SecretNames() []string {
	var out []string
	for _, b := range d.Blocks {
		spec, ok := LookupBlock(b.Type)
		if !ok {
			continue
		}
		for name, v := range b.Fields {
			f, ok := spec.Field(name)
			m, isMap := v.(map[string]any)
			if !ok || f.Kind != KindSecretMap || !isMap {
				continue
			}
			for _, secret := range m {
				if s, ok := secret.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
