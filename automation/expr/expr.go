// Package expr is the expression language of automations: CEL (cel-go) over the variables event,
// inputs, steps, instance (maps) and now (a timestamp), and `{{ expr }}` templates built on it.
//
// An Env compiles each distinct expression once and keeps the program in a bounded cache, and
// stops any evaluation that goes over its cost limit. Results come back as plain JSON-able Go
// values (map[string]any, []any, string, int64, float64, bool, nil; timestamps as RFC 3339
// strings, durations in Go's form, bytes as standard base64).
//
// Numbers: JSON has one number type but CEL keeps int and double apart (`1 + 1.0` has no
// overload), so an Env reads every whole float64 (|x| ≤ 2^53) and json.Number in Vars as an int:
// a payload decoded by encoding/json gives `event.number + 1 == 483`, not an overload error.
//
// Step outputs that are not known yet (TestRender without running code) are named in
// Vars.UnknownSteps; an expression that reads one evaluates to an Unknown instead of failing.
package expr

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// Limits of an Env unless Options say otherwise.
const (
	// DefaultCostLimit bounds one evaluation. A typical filter costs under 50; a comprehension
	// over a few hundred list items a few thousand.
	DefaultCostLimit = 1_000_000
	// DefaultCacheSize is how many compiled expressions and parsed templates an Env keeps.
	DefaultCacheSize = 4096
	// MaxExpressionLength caps an expression's length in code points.
	MaxExpressionLength = 8192
	// maxListRange caps lists.range(n), which allocates before any cost is counted.
	maxListRange = 10_000
)

// The variables every expression may read.
const (
	VarEvent    = "event"
	VarInputs   = "inputs"
	VarSteps    = "steps"
	VarInstance = "instance"
	VarNow      = "now"
	// VarInput is EvalCode's input_json, for trying an expression on any value.
	VarInput = "input"
)

// ErrCostLimit is wrapped by the error of an evaluation stopped for going over the cost limit.
var ErrCostLimit = errors.New("expression exceeded its cost limit")

// Options tune an Env; zero values take the defaults.
type Options struct {
	CostLimit uint64
	CacheSize int
}

// Env compiles and evaluates expressions and templates. It is safe for concurrent use.
type Env struct {
	cel       *cel.Env
	costLimit uint64
	programs  *cache[*Program]
	templates *cache[*Template]
}

// NewEnv builds an Env with the automation variables and the strings, encoders, math, lists and
// sets extensions.
func NewEnv(o Options) (*Env, error) {
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, fmt.Errorf("build CEL type registry: %w", err)
	}
	dynMap := cel.MapType(cel.StringType, cel.DynType)
	env, err := cel.NewEnv(
		cel.CustomTypeProvider(reg),
		cel.CustomTypeAdapter(jsonAdapter{reg}),
		cel.Variable(VarEvent, dynMap),
		cel.Variable(VarInputs, dynMap),
		cel.Variable(VarSteps, dynMap),
		cel.Variable(VarInstance, dynMap),
		cel.Variable(VarNow, cel.TimestampType),
		cel.Variable(VarInput, cel.DynType),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Encoders(),
		ext.Math(),
		ext.Lists(ext.ListsMaxRangeSize(maxListRange)),
		ext.Sets(),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
	)
	if err != nil {
		return nil, fmt.Errorf("build CEL environment: %w", err)
	}
	return &Env{
		cel:       env,
		costLimit: o.CostLimit,
		programs:  newCache[*Program](o.CacheSize),
		templates: newCache[*Template](o.CacheSize),
	}, nil
}

// Default returns the process-wide Env with default Options.
func Default() *Env { return defaultEnv() }

var defaultEnv = sync.OnceValue(func() *Env {
	env, err := NewEnv(Options{})
	if err != nil {
		panic(err) // the declarations are static: a failure is a programming error
	}
	return env
})

// Vars are the values an expression reads. Nil maps read as empty maps.
type Vars struct {
	Event    map[string]any
	Inputs   map[string]any
	Steps    map[string]any
	Instance map[string]any
	Now      time.Time
	// Input is what input reads (null when unset); only EvalCode sets it.
	Input any
	// UnknownSteps names steps whose outputs are not known; reading one gives an Unknown.
	UnknownSteps []string
}

// Error is an expression that does not compile. Line and Column (in code points) are 1-based
// and point at the first problem.
type Error struct {
	Line    int
	Column  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message) }

// EvalError is an expression that compiled but failed at run time, e.g. reading a missing key.
type EvalError struct {
	Expr string
	Err  error
}

func (e *EvalError) Error() string { return fmt.Sprintf("evaluate %q: %v", e.Expr, e.Err) }
func (e *EvalError) Unwrap() error { return e.Err }

// Program is one compiled expression. It is safe for concurrent use.
type Program struct {
	src       string
	name      string // src without surrounding space, for messages
	costLimit uint64
	prg       cel.Program
	outType   *cel.Type
	// stepRefs are the step ids the expression names literally; readsAllSteps is set when it
	// reads steps in a way that cannot be told apart (steps itself, steps[x]).
	stepRefs      []string
	readsAllSteps bool
	// partial evaluates with unknown steps; most programs never need it, so it is built lazily.
	partial func() (cel.Program, error)
}

// Compile compiles src, or returns the cached program. A compile failure is an *Error.
func (e *Env) Compile(src string) (*Program, error) {
	return e.programs.get(src, func() (*Program, error) { return e.compile(src) })
}

// CheckExpr reports whether src compiles, as an *Error when it does not.
func (e *Env) CheckExpr(src string) error {
	_, err := e.Compile(src)
	return err
}

// CheckCondition is CheckExpr for an expression that must give a bool (a filter).
func (e *Env) CheckCondition(src string) error {
	p, err := e.Compile(src)
	if err != nil {
		return err
	}
	if t := p.outType; !t.IsExactType(cel.DynType) && !t.IsExactType(cel.BoolType) {
		return &Error{Line: 1, Column: 1, Message: fmt.Sprintf("a condition must give a bool, this gives %s", t)}
	}
	return nil
}

// Eval compiles (or finds) src and evaluates it.
func (e *Env) Eval(src string, vars Vars) (any, error) {
	p, err := e.Compile(src)
	if err != nil {
		return nil, err
	}
	return p.Eval(vars)
}

func (e *Env) compile(src string) (*Program, error) {
	checked, iss := e.cel.Compile(src)
	if iss != nil && iss.Err() != nil {
		first := iss.Errors()[0]
		return nil, &Error{
			Line:    max(first.Location.Line(), 1),
			Column:  max(first.Location.Column(), 0) + 1,
			Message: first.Message,
		}
	}
	prg, err := e.cel.Program(checked, cel.CostLimit(e.costLimit))
	if err != nil {
		return nil, fmt.Errorf("plan %q: %w", src, err)
	}
	p := &Program{src: src, name: strings.TrimSpace(src), costLimit: e.costLimit, prg: prg, outType: checked.OutputType()}
	p.stepRefs, p.readsAllSteps = stepReferences(checked.NativeRep().Expr())
	p.partial = sync.OnceValues(func() (cel.Program, error) {
		return e.cel.Program(checked, cel.CostLimit(e.costLimit), cel.EvalOptions(cel.OptPartialEval))
	})
	return p, nil
}

// Source is the expression text.
func (p *Program) Source() string { return p.src }

// StepRefs lists the step ids the expression reads by name (steps.a, steps['a']), and reports
// whether it also reads steps in a way that may touch any step.
func (p *Program) StepRefs() (ids []string, any bool) {
	return slices.Clone(p.stepRefs), p.readsAllSteps
}

// Eval evaluates the program. A run-time failure is an *EvalError; an expression reading an
// unknown step gives an Unknown.
func (p *Program) Eval(vars Vars) (any, error) {
	val, err := p.evalVal(vars)
	if err != nil {
		return nil, err
	}
	out, err := toGo(val, p.name)
	if err != nil {
		return nil, &EvalError{Expr: p.name, Err: err}
	}
	return out, nil
}

// EvalBool evaluates a condition. A result that is not a bool is an error; an unknown result
// is reported by known == false.
func (p *Program) EvalBool(vars Vars) (value, known bool, err error) {
	val, err := p.evalVal(vars)
	if err != nil {
		return false, false, err
	}
	switch v := val.(type) {
	case types.Bool:
		return bool(v), true, nil
	case *types.Unknown:
		return false, false, nil
	}
	return false, false, &EvalError{Expr: p.name, Err: fmt.Errorf("a condition must give a bool, got %s", val.Type().TypeName())}
}

func (p *Program) evalVal(vars Vars) (ref.Val, error) {
	act := &activation{vars: &vars}
	prg := p.prg
	var in any = act
	if unknown := p.unknownRefs(vars.UnknownSteps); len(unknown) > 0 {
		var err error
		if prg, err = p.partial(); err != nil {
			return nil, fmt.Errorf("plan %q for partial evaluation: %w", p.src, err)
		}
		patterns := make([]*cel.AttributePatternType, len(unknown))
		for i, id := range unknown {
			patterns[i] = cel.AttributePattern(VarSteps).QualString(id)
		}
		if in, err = cel.PartialVars(act, patterns...); err != nil {
			return nil, fmt.Errorf("bind unknown steps of %q: %w", p.src, err)
		}
	}
	val, _, err := prg.Eval(in)
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			err = fmt.Errorf("%w of %d", ErrCostLimit, p.costLimit)
		}
		return nil, &EvalError{Expr: p.name, Err: err}
	}
	return val, nil
}

// unknownRefs are the unknown steps this program may read.
func (p *Program) unknownRefs(unknown []string) []string {
	if len(unknown) == 0 || (len(p.stepRefs) == 0 && !p.readsAllSteps) {
		return nil
	}
	if p.readsAllSteps {
		return unknown
	}
	var hit []string
	for _, id := range p.stepRefs {
		if slices.Contains(unknown, id) {
			hit = append(hit, id)
		}
	}
	return hit
}

// stepReferences walks a checked expression for the step ids it names.
func stepReferences(root ast.Expr) (ids []string, all bool) {
	named := map[int64]bool{} // ids of `steps` identifiers already accounted for
	ast.PreOrderVisit(root, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			sel := e.AsSelect()
			if isSteps(sel.Operand()) {
				named[sel.Operand().ID()] = true
				ids = appendUnique(ids, sel.FieldName())
			}
		case ast.CallKind:
			call := e.AsCall()
			args := call.Args()
			switch call.FunctionName() {
			case "_[_]", "_[?_]", "_?._":
				if len(args) == 2 && isSteps(args[0]) && args[1].Kind() == ast.LiteralKind {
					if key, ok := args[1].AsLiteral().(types.String); ok {
						named[args[0].ID()] = true
						ids = appendUnique(ids, string(key))
					}
				}
			}
		case ast.IdentKind:
			if isSteps(e) && !named[e.ID()] {
				all = true
			}
		}
	}))
	return ids, all
}

func isSteps(e ast.Expr) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == VarSteps }

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// activation resolves the automation variables straight from Vars, without building a map per
// evaluation.
type activation struct{ vars *Vars }

var emptyMap = map[string]any{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case VarEvent:
		return orEmpty(a.vars.Event), true
	case VarInputs:
		return orEmpty(a.vars.Inputs), true
	case VarSteps:
		return orEmpty(a.vars.Steps), true
	case VarInstance:
		return orEmpty(a.vars.Instance), true
	case VarNow:
		return a.vars.Now, true
	case VarInput:
		return a.vars.Input, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return emptyMap
	}
	return m
}
