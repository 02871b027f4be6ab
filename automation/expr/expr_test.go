package expr_test

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/expr"
)

func pullRequestEvent(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile("testdata/pull_request.opened.json")
	if err != nil {
		t.Fatal(err)
	}
	var event map[string]any
	if err := json.Unmarshal(data, &event); err != nil {
		t.Fatal(err)
	}
	return event
}

var now = time.Date(2026, 3, 3, 8, 16, 0, 0, time.UTC)

func testVars(t testing.TB) expr.Vars {
	return expr.Vars{
		Event:  pullRequestEvent(t),
		Inputs: map[string]any{"profile_id": "prof_1", "labels": []any{"review-me"}},
		Steps:  map[string]any{"fetch": map[string]any{"status": int64(200), "body": map[string]any{"ok": true}}},
		Now:    now,
	}
}

func TestCompileErrorsGivePositionsUsersCount(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		line     int
		column   int
		contains string
	}{
		{"undeclared variable", "foo == 1", 1, 1, "undeclared reference to 'foo'"},
		{"second line, 1-based column", "event.action == 'opened' &&\n  bar", 2, 3, "undeclared reference to 'bar'"},
		{"columns count code points", "'é' + baz", 1, 7, "undeclared reference to 'baz'"},
		{"syntax error", "event.number +", 1, 15, "Syntax error"},
		{"no such overload", "1 + 'a'", 1, 3, "no matching overload"},
	}
	env := expr.Default()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := env.Compile(tt.src)
			var ce *expr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q) error = %v, want *expr.Error", tt.src, err)
			}
			if ce.Line != tt.line || ce.Column != tt.column || !strings.Contains(ce.Message, tt.contains) {
				t.Errorf("Compile(%q) = %d:%d %q, want %d:%d containing %q", tt.src, ce.Line, ce.Column, ce.Message, tt.line, tt.column, tt.contains)
			}
		})
	}
}

func TestEvalGivesPlainJSONValues(t *testing.T) {
	tests := []struct {
		src  string
		want any
	}{
		{"event.number", int64(482)},
		{"event.number + 1", int64(483)},
		{"event.pull_request.title", "automation: CEL filters with compile caching"},
		{"event.pull_request.draft", false},
		{"event.pull_request.merged_at", nil},
		{"event.pull_request.labels.map(l, l.name)", []any{"automation", "review-me"}},
		{"{'a': [1, 2.5, null], 'b': now}", map[string]any{"a": []any{int64(1), 2.5, nil}, "b": "2026-03-03T08:16:00Z"}},
		{"now", "2026-03-03T08:16:00Z"},
		{"now - timestamp(event.pull_request.created_at)", "30s"},
		{"b'hi'", "aGk="},
		{"steps.fetch.body", map[string]any{"ok": true}},
		{"inputs.?missing.orValue('fallback')", "fallback"},
		{"'a,b'.split(',')", []any{"a", "b"}},
		{"math.greatest(event.pull_request.additions, 100)", int64(412)},
		{"base64.encode(b'x')", "eA=="},
		{"[1, 2, 2].distinct()", []any{int64(1), int64(2)}},
		{"sets.contains(event.pull_request.labels.map(l, l.name), inputs.labels)", true},
		{"type(1)", "int"},
		{"1u", int64(1)},
	}
	env := expr.Default()
	vars := testVars(t)
	for _, tt := range tests {
		got, err := env.Eval(tt.src, vars)
		if err != nil {
			t.Errorf("Eval(%q): %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Eval(%q) = %#v, want %#v", tt.src, got, tt.want)
		}
	}
}

func TestEvalErrorsNameTheExpression(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{"event.pull_request.nope", `evaluate "event.pull_request.nope": no such key: nope`},
		{"1.0 / 0.0", `evaluate "1.0 / 0.0": +Inf has no JSON form`},
		{"inputs.count > 1", `evaluate "inputs.count > 1": no such key: count`},
	}
	env := expr.Default()
	vars := testVars(t)
	for _, tt := range tests {
		_, err := env.Eval(tt.src, vars)
		var ee *expr.EvalError
		if !errors.As(err, &ee) || err.Error() != tt.want {
			t.Errorf("Eval(%q) error = %v, want *EvalError %q", tt.src, err, tt.want)
		}
	}
}

func TestCostLimitStopsHeavyExpressions(t *testing.T) {
	env, err := expr.NewEnv(expr.Options{CostLimit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	heavy := "lists.range(1000).map(x, lists.range(1000).map(y, x * y)).size()"
	if _, err := env.Eval(heavy, expr.Vars{}); !errors.Is(err, expr.ErrCostLimit) {
		t.Fatalf("heavy expression: error = %v, want ErrCostLimit", err)
	}
	if got, err := env.Eval("lists.range(10).size()", expr.Vars{}); err != nil || got != int64(10) {
		t.Fatalf("light expression = %v, %v; want 10", got, err)
	}
}

func TestEvalBool(t *testing.T) {
	tests := []struct {
		src     string
		unknown []string
		want    bool
		known   bool
		err     string
	}{
		{src: "event.action == 'opened'", want: true, known: true},
		{src: "event.pull_request.draft", want: false, known: true},
		{src: "steps.code.ok", unknown: []string{"code"}, known: false},
		{src: "event.number", err: "a condition must give a bool, got int"},
	}
	env := expr.Default()
	for _, tt := range tests {
		vars := testVars(t)
		vars.UnknownSteps = tt.unknown
		prg, err := env.Compile(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		got, known, err := prg.EvalBool(vars)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("EvalBool(%q) error = %v, want %q", tt.src, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || known != tt.known {
			t.Errorf("EvalBool(%q) = %v, %v, %v; want %v, %v", tt.src, got, known, err, tt.want, tt.known)
		}
	}
}

func TestCheckConditionRefusesNonBoolResults(t *testing.T) {
	env := expr.Default()
	for src, ok := range map[string]bool{
		"event.action == 'opened'": true,
		"event.pull_request.draft": true, // dyn: known only at run time
		"'opened'":                 false,
		"size(event)":              false,
	} {
		if err := env.CheckCondition(src); (err == nil) != ok {
			t.Errorf("CheckCondition(%q) = %v, want ok=%v", src, err, ok)
		}
	}
}

func TestCompileCacheCompilesOnceAndStaysBounded(t *testing.T) {
	env, err := expr.NewEnv(expr.Options{CacheSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	const src = "event.action == 'opened'"
	programs := make([]*expr.Program, 16)
	var wg sync.WaitGroup
	for i := range programs {
		wg.Go(func() {
			p, err := env.Compile(src)
			if err != nil {
				t.Error(err)
			}
			programs[i] = p
		})
	}
	wg.Wait()
	for _, p := range programs {
		if p != programs[0] {
			t.Fatal("concurrent compiles of one expression gave different programs")
		}
	}
	for _, other := range []string{"1 + 1", "2 + 2"} {
		if _, err := env.Compile(other); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := env.Compile(src); p == programs[0] {
		t.Error("the least recently used program survived a full cache")
	}
}

func TestStepRefs(t *testing.T) {
	tests := []struct {
		src  string
		ids  []string
		anyS bool
	}{
		{"steps.a.x + steps['b'].y + steps.?c.orValue(1)", []string{"a", "b", "c"}, false},
		{"has(steps.a.x)", []string{"a"}, false},
		{"steps[inputs.which]", nil, true},
		{"size(steps)", nil, true},
		{"event.number", nil, false},
	}
	for _, tt := range tests {
		p, err := expr.Default().Compile(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		ids, anyS := p.StepRefs()
		if !reflect.DeepEqual(ids, tt.ids) || anyS != tt.anyS {
			t.Errorf("StepRefs(%q) = %v, %v; want %v, %v", tt.src, ids, anyS, tt.ids, tt.anyS)
		}
	}
}

func TestWholeJSONNumbersAreInts(t *testing.T) {
	vars := expr.Vars{Event: map[string]any{
		"n": float64(3), "f": 2.5, "big": 1e300, "num": json.Number("7"),
		"list": []any{float64(1), map[string]any{"m": float64(-7)}},
	}}
	tests := []struct {
		src  string
		want any
	}{
		{"event.n + 1", int64(4)},
		{"event.f + 1.0", 3.5},
		{"event.big > 1e299", true},
		{"event.num * 2", int64(14)},
		{"event.list[0] + event.list[1].m", int64(-6)},
		{"type(event.list[1].m) == int", true},
	}
	for _, tt := range tests {
		got, err := expr.Default().Eval(tt.src, vars)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Eval(%q) = %#v, %v; want %#v", tt.src, got, err, tt.want)
		}
	}
}
