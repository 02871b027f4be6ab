package definition

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Limits of a definition.
const (
	MaxEntrypoints = 10
	MaxInputs      = 50
	MaxBlocks      = 100
	MaxRetries     = 10
	MaxBackoff     = time.Hour
)

// eventKeyPattern is provider.event[.action], e.g. github.pull_request.opened or webhook.<id>.
var eventKeyPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)?$`)

// Validator checks definitions with the checkers it is handed. A nil checker skips its checks:
// without Exprs no expression or template is compiled, without Script no code is parsed, and
// without Cron a schedule is only counted to five fields (a macro like @daily passes).
type Validator struct {
	Exprs  ExprChecker
	Script ScriptChecker
	Cron   CronChecker
}

// Load parses and validates `definition_json`.
func (v Validator) Load(definitionJSON []byte) (Definition, []BlockError) {
	def, errs := Parse(definitionJSON)
	if len(errs) > 0 {
		return def, errs
	}
	return def, v.Validate(def)
}

// Validate checks everything a definition means: entrypoints, inputs, the instance key, each
// block's fields against its type, and the blocks' order.
func (v Validator) Validate(def Definition) []BlockError {
	var errs []BlockError
	if def.Version != Version {
		errs = append(errs, BlockError{Field: "version", Code: CodeInvalid, Message: fmt.Sprintf("must be %d", Version)})
	}
	errs = append(errs, v.validateEntrypoints(def.Entrypoints)...)
	errs = append(errs, validateInputDecls(def.Inputs)...)
	if def.Instance != nil {
		switch {
		case strings.TrimSpace(def.Instance.Key) == "":
			errs = append(errs, BlockError{Field: "instance.key", Code: CodeRequired, Message: "is required"})
		case v.Exprs != nil:
			if err := v.Exprs.CheckExpr(def.Instance.Key); err != nil {
				errs = append(errs, BlockError{Field: "instance.key", Code: CodeCEL, Message: err.Error()})
			}
		}
	}
	errs = append(errs, v.validateBlocks(def)...)
	return errs
}

func (v Validator) validateEntrypoints(eps []Entrypoint) []BlockError {
	var errs []BlockError
	add := func(i int, field, code, format string, args ...any) {
		errs = append(errs, BlockError{Field: FieldPath("entrypoints", i, field), Code: code, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(eps) == 0:
		return []BlockError{{Field: "entrypoints", Code: CodeRequired, Message: "needs at least one entrypoint"}}
	case len(eps) > MaxEntrypoints:
		errs = append(errs, BlockError{Field: "entrypoints", Code: CodeInvalid, Message: fmt.Sprintf("at most %d entrypoints", MaxEntrypoints)})
	}
	seen := map[string]bool{}
	for i, ep := range eps {
		switch {
		case !idPattern.MatchString(ep.ID):
			add(i, "id", CodeInvalid, "an id is %s", idShape)
		case seen[ep.ID]:
			add(i, "id", CodeDuplicate, "entrypoint id %q is used twice", ep.ID)
		}
		seen[ep.ID] = true
		// Which fields each type takes; the others must be empty.
		takes := map[string]bool{}
		switch ep.Type {
		case EntrypointEvent:
			takes["event_key"] = true
			if !eventKeyPattern.MatchString(ep.EventKey) {
				add(i, "event_key", CodeInvalid, "an event key is provider.event or provider.event.action, e.g. github.pull_request.opened")
			}
		case EntrypointSchedule:
			takes["cron"], takes["time_zone"] = true, true
			v.validateSchedule(ep, func(field, code, msg string) { add(i, field, code, "%s", msg) })
		case EntrypointManual:
		default:
			add(i, "type", CodeInvalid, "must be one of %s, %s, %s", EntrypointEvent, EntrypointSchedule, EntrypointManual)
			continue
		}
		// A list, not a map, so that the errors come in the same order every time.
		for _, f := range []struct{ name, value string }{{"event_key", ep.EventKey}, {"cron", ep.Cron}, {"time_zone", ep.TimeZone}} {
			if f.value != "" && !takes[f.name] {
				add(i, f.name, CodeInvalid, "%s entrypoints have no %s", ep.Type, f.name)
			}
		}
		if ep.Filter != "" && v.Exprs != nil {
			if err := v.Exprs.CheckCondition(ep.Filter); err != nil {
				add(i, "filter", CodeCEL, "%v", err)
			}
		}
	}
	return errs
}

func (v Validator) validateSchedule(ep Entrypoint, add func(field, code, msg string)) {
	switch {
	case ep.Cron == "":
		add("cron", CodeRequired, "a schedule needs a cron expression")
	case !strings.HasPrefix(ep.Cron, "@") && len(strings.Fields(ep.Cron)) != 5:
		add("cron", CodeInvalid, "must have five fields: minute hour day-of-month month day-of-week")
	case v.Cron != nil:
		if err := v.Cron(ep.Cron); err != nil {
			add("cron", CodeInvalid, err.Error())
		}
	}
	if ep.TimeZone != "" {
		if _, err := time.LoadLocation(ep.TimeZone); err != nil {
			add("time_zone", CodeInvalid, "must be an IANA time zone such as Europe/Paris")
		}
	}
}

func (v Validator) validateBlocks(def Definition) []BlockError {
	var errs []BlockError
	switch {
	case len(def.Blocks) == 0:
		return []BlockError{{Field: "blocks", Code: CodeRequired, Message: "needs at least one block"}}
	case len(def.Blocks) > MaxBlocks:
		errs = append(errs, BlockError{Field: "blocks", Code: CodeInvalid, Message: fmt.Sprintf("at most %d blocks", MaxBlocks)})
	}
	seen := map[string]bool{}
	for i, b := range def.Blocks {
		switch {
		case b.ID == "":
			errs = append(errs, BlockError{Field: FieldPath("blocks", i, "id"), Code: CodeRequired, Message: "is required"})
		case !idPattern.MatchString(b.ID):
			errs = append(errs, BlockError{BlockID: b.ID, Field: "id", Code: CodeInvalid, Message: "an id is " + idShape})
		case seen[b.ID]:
			errs = append(errs, BlockError{BlockID: b.ID, Field: "id", Code: CodeDuplicate, Message: fmt.Sprintf("block id %q is used twice", b.ID)})
		}
		seen[b.ID] = true
		if b.Retry != nil {
			errs = append(errs, blockErrors(b.ID, checkRetry(b.Retry, "retry"))...)
		}
		spec, ok := LookupBlock(b.Type)
		if !ok {
			errs = append(errs, BlockError{BlockID: b.ID, Field: "type", Code: CodeInvalid, Message: fmt.Sprintf("unknown block type %q", b.Type)})
			continue
		}
		c := &fieldChecker{exprs: v.Exprs, script: v.Script}
		errs = append(errs, blockErrors(b.ID, checkBlockFields(spec, b.Fields, c))...)
		if def.Instance == nil && needsInstance(b) {
			errs = append(errs, BlockError{BlockID: b.ID, Field: needsInstanceField(b), Code: CodeInvalid,
				Message: "needs instances: set the definition's instance.key"})
		}
	}
	_, orderErrs := Order(def.Blocks)
	return append(errs, orderErrs...)
}

// needsInstance reports whether a block works on the current instance: instance blocks do, and
// so does a prompt block that names no session (it prompts the instance's session).
func needsInstance(b Block) bool {
	_, hasSession := b.Fields["session_id"]
	return b.Type == BlockInstance || (b.Type == BlockPrompt && !hasSession)
}

func needsInstanceField(b Block) string {
	if b.Type == BlockPrompt {
		return "session_id"
	}
	return "action"
}

func checkRetry(r *Retry, field string) []fieldProblem {
	var out []fieldProblem
	if r.MaxAttempts < 0 || r.MaxAttempts > MaxRetries {
		out = append(out, fieldProblem{path: []any{field, "max_attempts"}, code: CodeInvalid, msg: fmt.Sprintf("must be between 1 and %d", MaxRetries)})
	}
	if r.Backoff != "" {
		if msg := checkDuration(r.Backoff, MaxBackoff); msg != "" {
			out = append(out, fieldProblem{path: []any{field, "backoff"}, code: CodeInvalid, msg: msg})
		}
	}
	return out
}

// Order returns the indices of blocks in the order they run: each block after the blocks it
// needs (without needs, after the block before it), ties in declaration order. Needs of unknown
// blocks are reported and ignored; blocks caught in a cycle are reported and come last, in
// declaration order.
func Order(blocks []Block) ([]int, []BlockError) {
	var errs []BlockError
	index := make(map[string]int, len(blocks))
	for i, b := range blocks {
		if _, dup := index[b.ID]; !dup {
			index[b.ID] = i
		}
	}
	deps := make([][]int, len(blocks))
	for i, b := range blocks {
		if len(b.Needs) == 0 && i > 0 {
			deps[i] = []int{i - 1}
		}
		for j, need := range b.Needs {
			d, ok := index[need]
			switch {
			case !ok:
				errs = append(errs, BlockError{BlockID: b.ID, Field: FieldPath("needs", j), Code: CodeReference, Message: fmt.Sprintf("no block %q", need)})
			case d == i:
				errs = append(errs, BlockError{BlockID: b.ID, Field: FieldPath("needs", j), Code: CodeCycle, Message: "a block cannot need itself"})
			case !slices.Contains(deps[i], d):
				deps[i] = append(deps[i], d)
			}
		}
	}
	order := make([]int, 0, len(blocks))
	done := make([]bool, len(blocks))
	for progressed := true; progressed; {
		progressed = false
		for i := range blocks {
			if !done[i] && allDone(deps[i], done) {
				done[i], progressed = true, true
				order = append(order, i)
				break // restart from the top so earlier blocks win ties
			}
		}
	}
	if len(order) < len(blocks) {
		cycle := findCycle(deps, done)
		names := make([]string, len(cycle))
		for k, i := range cycle {
			names[k] = blocks[i].ID
		}
		errs = append(errs, BlockError{BlockID: blocks[cycle[0]].ID, Field: "needs", Code: CodeCycle,
			Message: "blocks need each other: " + strings.Join(append(names, names[0]), " → ")})
		for i := range blocks {
			if !done[i] {
				order = append(order, i)
			}
		}
	}
	return order, errs
}

// allDone reports whether the dependencies of a block have run. A block's need of itself is
// reported above and never becomes a dependency, so it does not hold the block back.
func allDone(deps []int, done []bool) bool {
	for _, d := range deps {
		if !done[d] {
			return false
		}
	}
	return true
}

// findCycle follows dependencies among the blocks that could not be ordered until one repeats.
func findCycle(deps [][]int, done []bool) []int {
	start := slices.Index(done, false)
	var path []int
	pos := map[int]int{}
	for cur := start; ; {
		if at, seen := pos[cur]; seen {
			return path[at:]
		}
		pos[cur] = len(path)
		path = append(path, cur)
		for _, d := range deps[cur] {
			if !done[d] {
				cur = d
				break
			}
		}
	}
}
