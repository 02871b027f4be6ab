// Package render is the core of TestRender: it renders every block of a definition against one
// event (a recorded sample or a given payload) without any side effect or I/O, and says what
// each block would do.
//
// What it decides:
//
//   - The entrypoint comes first, as a pseudo block with BlockID "entrypoint:<id>" and BlockType
//     "entrypoint": its filter sets FilterPass (unset when it has no filter) and, when the
//     definition groups events into instances, its fields show the evaluated instance_key. That
//     key is also instance.key for the blocks unless the scope's Instance has a key already.
//   - Blocks follow in run order (definition.Order). A filter block sets FilterPass. After a
//     false filter (the entrypoint's or a block's) later blocks are still rendered, so every
//     template is checked, but marked "reached": false.
//   - RenderedJSON is {"fields": ..., "output": ..., "reached": bool, "notes": [...]}. fields are
//     the block's fields rendered, with defaults filled in; conditions, JavaScript and secret
//     names are shown as written (secrets are by reference and never resolved). output is what
//     steps.<id> holds for later blocks.
//   - Outputs: a filter's is {"pass": bool}. A code block's is what Options.RunCode returns; with
//     no RunCode it is {"_unknown": true}. Every other block's is {"_unknown": true, "would":
//     "<what it would do>"}, since only running it gives its result. An expression that reads an
//     unknown output renders as an expr.Unknown placeholder ({"_unknown": true, "expr": ...}, or
//     "<unknown: expr>" inside text) and the block gets a note; it is not an error.
//   - ScopeJSON is {"event", "inputs", "instance", "now", "steps"} as the block saw it.
//   - Errors are BlockErrors: code "template" for a template that does not compile, "cel" for a
//     condition, "eval" for an expression that failed (a missing key), and the definition
//     package's codes for a rendered value of the wrong form.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
)

// EntrypointPrefix starts the BlockID of the entrypoint's pseudo block.
const EntrypointPrefix = "entrypoint:"

// EntrypointType is the BlockType of the entrypoint's pseudo block.
const EntrypointType = "entrypoint"

// Scope is what the expressions of a run read.
type Scope struct {
	Event map[string]any
	// EventJSON, when set, is Event as JSON (the recorded payload); ScopeJSON then carries it
	// as is instead of encoding Event again.
	EventJSON json.RawMessage
	Inputs    map[string]any
	Instance  map[string]any
	Now       time.Time
	// Steps are outputs known before the first block (e.g. of a run being retried).
	Steps map[string]any
}

// CodeRunner runs a code block's source against a scope and returns its output; the engine
// passes the JavaScript sandbox.
type CodeRunner func(source string, scope Scope) (any, error)

// Options tune Render.
type Options struct {
	Env *expr.Env // nil means expr.Default()
	// EntrypointID picks the entrypoint; "" means the first.
	EntrypointID string
	// RunCode runs code blocks; nil leaves their outputs unknown.
	RunCode CodeRunner
}

// BlockRender is one rendered block (or the entrypoint's pseudo block).
type BlockRender struct {
	BlockID      string
	BlockType    string
	RenderedJSON json.RawMessage
	FilterPass   *bool
	ScopeJSON    json.RawMessage
}

// Rendered is the content of RenderedJSON.
type Rendered struct {
	Fields  map[string]any `json:"fields"`
	Output  any            `json:"output"`
	Reached bool           `json:"reached"`
	Notes   []string       `json:"notes,omitempty"`
}

// renderer holds one Render call's state.
type renderer struct {
	env      *expr.Env
	opts     Options
	vars     expr.Vars
	reached  bool
	notReach string // why later blocks are not reached
	fixed    []byte // the scope's JSON up to steps: {"event":…,"inputs":…,"instance":…,"now":…
	steps    []byte // the members of steps' JSON object so far: "a":…,"b":…
	out      []BlockRender
	errs     []definition.BlockError
}

// Render renders the entrypoint and every block of def against scope.
func Render(def definition.Definition, scope Scope, opts Options) ([]BlockRender, []definition.BlockError) {
	r := &renderer{env: opts.Env, opts: opts, reached: true}
	if r.env == nil {
		r.env = expr.Default()
	}
	r.vars = expr.Vars{
		Event:    scope.Event,
		Inputs:   scope.Inputs,
		Instance: maps.Clone(scope.Instance),
		Steps:    maps.Clone(scope.Steps),
		Now:      scope.Now,
	}
	if r.vars.Steps == nil {
		r.vars.Steps = map[string]any{}
	}
	r.entrypoint(def)
	if err := r.freezeScope(scope.EventJSON); err != nil {
		return nil, []definition.BlockError{{Field: "scope", Code: definition.CodeJSON, Message: err.Error()}}
	}
	r.out[0].ScopeJSON = r.scopeJSON()
	order, orderErrs := definition.Order(def.Blocks)
	r.errs = append(r.errs, orderErrs...)
	for _, i := range order {
		r.block(def.Blocks[i])
	}
	return r.out, r.errs
}

func (r *renderer) entrypoint(def definition.Definition) {
	var ep *definition.Entrypoint
	for i := range def.Entrypoints {
		if r.opts.EntrypointID == "" || def.Entrypoints[i].ID == r.opts.EntrypointID {
			ep = &def.Entrypoints[i]
			break
		}
	}
	if ep == nil {
		r.errs = append(r.errs, definition.BlockError{Field: "entrypoint_id", Code: definition.CodeReference,
			Message: fmt.Sprintf("no entrypoint %q", r.opts.EntrypointID)})
		r.emit(BlockRender{BlockType: EntrypointType}, Rendered{Fields: map[string]any{}, Reached: true})
		return
	}
	id := EntrypointPrefix + ep.ID
	br := BlockRender{BlockID: id, BlockType: EntrypointType}
	res := Rendered{Fields: map[string]any{"type": ep.Type}, Reached: true}
	for k, v := range map[string]string{"event_key": ep.EventKey, "cron": ep.Cron, "time_zone": ep.TimeZone, "filter": ep.Filter} {
		if v != "" {
			res.Fields[k] = v
		}
	}
	if def.Instance != nil {
		if key, ok := r.instanceKey(id, def.Instance.Key); ok {
			res.Fields["instance_key"] = key
		}
	}
	if ep.Filter != "" {
		br.FilterPass = r.condition(id, "filter", ep.Filter, &res)
	}
	r.emit(br, res)
}

// instanceKey evaluates the instance key and makes it instance.key for the blocks.
func (r *renderer) instanceKey(id, src string) (any, bool) {
	key, err := r.env.Eval(src, r.vars)
	if err != nil {
		r.errs = append(r.errs, exprError(id, "instance.key", err, definition.CodeCEL))
		return nil, false
	}
	if _, isString := key.(string); !isString {
		r.errs = append(r.errs, definition.BlockError{BlockID: id, Field: "instance.key", Code: definition.CodeEval,
			Message: fmt.Sprintf("the instance key must be a string, got %T", key)})
		return nil, false
	}
	if r.vars.Instance == nil {
		r.vars.Instance = map[string]any{}
	}
	if _, given := r.vars.Instance["key"]; !given {
		r.vars.Instance["key"] = key
	}
	return key, true
}

// condition evaluates a filter; a false result stops later blocks being reached.
func (r *renderer) condition(id, field, src string, res *Rendered) *bool {
	prg, err := r.env.Compile(src)
	if err != nil {
		r.errs = append(r.errs, exprError(id, field, err, definition.CodeCEL))
		return nil
	}
	pass, known, err := prg.EvalBool(r.vars)
	switch {
	case err != nil:
		r.errs = append(r.errs, exprError(id, field, err, definition.CodeCEL))
		return nil
	case !known:
		res.Notes = append(res.Notes, "the condition reads an output known only when the run gets here")
		return nil
	}
	if !pass && r.reached {
		r.reached, r.notReach = false, fmt.Sprintf("not reached: %s is false", id)
	}
	return &pass
}

func (r *renderer) block(b definition.Block) {
	br := BlockRender{BlockID: b.ID, BlockType: b.Type, ScopeJSON: r.scopeJSON()}
	res := Rendered{Reached: r.reached}
	if !r.reached {
		res.Notes = append(res.Notes, r.notReach)
	}
	spec, ok := definition.LookupBlock(b.Type)
	if !ok {
		r.errs = append(r.errs, definition.BlockError{BlockID: b.ID, Field: "type", Code: definition.CodeInvalid, Message: fmt.Sprintf("unknown block type %q", b.Type)})
		res.Fields = b.Fields
		r.setOutput(b.ID, map[string]any{"_unknown": true}, true)
		r.emit(br, res)
		return
	}
	res.Fields = r.fields(b, spec)
	switch b.Type {
	case definition.BlockFilter:
		src, _ := b.Fields["condition"].(string)
		br.FilterPass = r.condition(b.ID, "condition", src, &res)
		if br.FilterPass == nil {
			res.Output = map[string]any{"_unknown": true}
		} else {
			res.Output = map[string]any{"pass": *br.FilterPass}
		}
		r.setOutput(b.ID, res.Output, br.FilterPass == nil)
	case definition.BlockCode:
		res.Output = r.runCode(b, &res)
	default:
		res.Output = map[string]any{"_unknown": true, "would": would(b.Type, res.Fields)}
		r.setOutput(b.ID, res.Output, true)
	}
	if reads := r.unknownReads(b, spec); len(reads) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("reads %s, known only when the run gets here", strings.Join(reads, ", ")))
	}
	r.emit(br, res)
}

// fields renders a block's rendered fields, fills in defaults and checks the rendered forms.
func (r *renderer) fields(b definition.Block, spec definition.BlockSpec) map[string]any {
	out := make(map[string]any, len(spec.Fields))
	templated := map[string]any{}
	for k, v := range b.Fields {
		if f, ok := spec.Field(k); ok && f.Kind.Rendered() {
			templated[k] = v
		} else {
			out[k] = v // as written: conditions, JavaScript, secret names, unknown fields
		}
	}
	rendered, err := r.env.RenderValue(templated, r.vars)
	if err != nil {
		var fes expr.FieldErrors
		errors.As(err, &fes)
		for _, fe := range fes {
			r.errs = append(r.errs, exprError(b.ID, definition.FieldPath(fe.Path...), fe.Err, definition.CodeTemplate))
		}
	}
	maps.Copy(out, rendered.(map[string]any))
	for _, f := range spec.Fields {
		if _, set := out[f.Name]; !set && f.Default != nil {
			out[f.Name] = f.Default
		}
	}
	if err == nil {
		r.errs = append(r.errs, definition.CheckRendered(b.ID, b.Type, out)...)
	}
	return out
}

func (r *renderer) runCode(b definition.Block, res *Rendered) any {
	unknown := map[string]any{"_unknown": true}
	if r.opts.RunCode == nil {
		res.Notes = append(res.Notes, "code runs only in a dry run or a run")
		r.setOutput(b.ID, unknown, true)
		return unknown
	}
	src, _ := b.Fields["source"].(string)
	out, err := r.opts.RunCode(src, Scope{Event: r.vars.Event, Inputs: r.vars.Inputs, Instance: r.vars.Instance, Now: r.vars.Now, Steps: maps.Clone(r.vars.Steps)})
	if err != nil {
		r.errs = append(r.errs, definition.BlockError{BlockID: b.ID, Field: "source", Code: definition.CodeEval, Message: err.Error()})
		r.setOutput(b.ID, unknown, true)
		return unknown
	}
	r.setOutput(b.ID, out, false)
	return out
}

// setOutput records a block's output for the blocks after it.
func (r *renderer) setOutput(id string, out any, unknown bool) {
	r.vars.Steps[id] = out
	r.appendStep(id, out)
	if unknown {
		r.vars.UnknownSteps = append(r.vars.UnknownSteps, id)
	} else {
		r.vars.UnknownSteps = slices.DeleteFunc(r.vars.UnknownSteps, func(s string) bool { return s == id })
	}
}

// unknownReads lists the unknown outputs a block's expressions read.
func (r *renderer) unknownReads(b definition.Block, spec definition.BlockSpec) []string {
	if len(r.vars.UnknownSteps) == 0 {
		return nil
	}
	var programs []*expr.Program
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if t, err := r.env.ParseTemplate(v); err == nil { // a failure is reported while rendering
				programs = append(programs, t.Programs()...)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for k, v := range b.Fields {
		f, ok := spec.Field(k)
		switch {
		case ok && f.Kind == definition.KindCondition:
			if p, err := r.env.Compile(fmt.Sprint(v)); err == nil {
				programs = append(programs, p)
			}
		case ok && f.Kind.Rendered():
			walk(v)
		}
	}
	var reads []string
	for _, p := range programs {
		ids, all := p.StepRefs()
		for _, id := range r.vars.UnknownSteps {
			if (all || slices.Contains(ids, id)) && !slices.Contains(reads, "steps."+id) {
				reads = append(reads, "steps."+id)
			}
		}
	}
	slices.Sort(reads)
	return reads
}

// would says in a few words what a block would do with its rendered fields.
func would(typ string, f map[string]any) string {
	switch typ {
	case definition.BlockHTTP:
		return fmt.Sprintf("%v %v", f["method"], f["url"])
	case definition.BlockTask:
		return fmt.Sprintf("start a task with profile %v", f["profile_id"])
	case definition.BlockPrompt:
		if s, ok := f["session_id"]; ok {
			return fmt.Sprintf("prompt session %v", s)
		}
		return "prompt the instance's session"
	case definition.BlockInstance:
		switch f["action"] {
		case definition.InstanceWriteHandle:
			return fmt.Sprintf("write instance handle %v", f["handle"])
		default:
			return fmt.Sprintf("%v the instance", f["action"])
		}
	case definition.BlockDelay:
		if d, ok := f["duration"]; ok {
			return fmt.Sprintf("wait %v", d)
		}
		return fmt.Sprintf("wait until %v", f["until"])
	}
	return "run a " + typ + " block"
}

// exprError turns an expression failure into a BlockError: compile errors get compileCode,
// run-time failures "eval".
func exprError(blockID, field string, err error, compileCode string) definition.BlockError {
	code := definition.CodeEval
	var ce *expr.Error
	if errors.As(err, &ce) {
		code = compileCode
	}
	return definition.BlockError{BlockID: blockID, Field: field, Code: code, Message: err.Error()}
}

// emit adds a rendered block to the output, with res as its RenderedJSON.
func (r *renderer) emit(br BlockRender, res Rendered) {
	data, err := json.Marshal(res)
	if err != nil {
		r.errs = append(r.errs, definition.BlockError{BlockID: br.BlockID, Field: "rendered_json", Code: definition.CodeJSON, Message: err.Error()})
		data = []byte("null")
	}
	br.RenderedJSON = data
	r.out = append(r.out, br)
}

// freezeScope encodes the parts of the scope no block changes, once, and the steps known
// before the first block.
func (r *renderer) freezeScope(eventJSON json.RawMessage) error {
	var b bytes.Buffer
	b.WriteString(`{"event":`)
	if len(eventJSON) == 0 {
		var err error
		if eventJSON, err = json.Marshal(r.vars.Event); err != nil {
			return fmt.Errorf("encode scope event: %w", err)
		}
	}
	b.Write(eventJSON)
	for _, part := range []struct {
		name string
		v    any
	}{{"inputs", r.vars.Inputs}, {"instance", r.vars.Instance}, {"now", r.vars.Now.UTC()}} {
		data, err := json.Marshal(part.v)
		if err != nil {
			return fmt.Errorf("encode scope %s: %w", part.name, err)
		}
		fmt.Fprintf(&b, ",%q:%s", part.name, data)
	}
	r.fixed = b.Bytes()
	for _, id := range slices.Sorted(maps.Keys(r.vars.Steps)) {
		r.appendStep(id, r.vars.Steps[id])
	}
	return nil
}

// appendStep adds one output to the steps' JSON; each output is encoded once however many
// blocks follow it.
func (r *renderer) appendStep(id string, out any) {
	if r.fixed == nil {
		return // before freezeScope, which adds the steps known by then
	}
	data, err := json.Marshal(out)
	if err != nil {
		data = []byte("null") // outputs are rendered values or RunCode's JSON-able result
	}
	if len(r.steps) > 0 {
		r.steps = append(r.steps, ',')
	}
	r.steps = strconv.AppendQuote(r.steps, id)
	r.steps = append(r.steps, ':')
	r.steps = append(r.steps, data...)
}

func (r *renderer) scopeJSON() json.RawMessage {
	out := make([]byte, 0, len(r.fixed)+len(r.steps)+12)
	out = append(out, r.fixed...)
	out = append(out, `,"steps":{`...)
	out = append(out, r.steps...)
	return append(out, "}}"...)
}
