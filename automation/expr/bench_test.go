package expr_test

import (
	"testing"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/hangar-dev/hangar/automation/expr"
)

// prFilter is the kind of filter a pull-request automation carries.
const prFilter = `event.action in ['opened', 'synchronize', 'ready_for_review'] &&
	!event.pull_request.draft &&
	event.pull_request.base.ref == 'main' &&
	event.pull_request.labels.exists(l, l.name == 'review-me') &&
	!event.pull_request.user.login.endsWith('[bot]')`

func reportEvalsPerSecond(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "evals/s")
}

func BenchmarkFilterEval(b *testing.B) {
	prg, err := expr.Default().Compile(prFilter)
	if err != nil {
		b.Fatal(err)
	}
	vars := testVars(b)
	n := 0
	for b.Loop() {
		pass, known, err := prg.EvalBool(vars)
		if err != nil || !pass || !known {
			b.Fatalf("filter = %v, %v, %v", pass, known, err)
		}
		n++
	}
	reportEvalsPerSecond(b, n)
}

// BenchmarkRawCELEval is the baseline: the same filter through cel-go directly, with a
// prebuilt activation map and no cost tracking.
func BenchmarkRawCELEval(b *testing.B) {
	env, err := cel.NewEnv(cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		b.Fatal(err)
	}
	checked, iss := env.Compile(prFilter)
	if iss.Err() != nil {
		b.Fatal(iss.Err())
	}
	prg, err := env.Program(checked)
	if err != nil {
		b.Fatal(err)
	}
	act := map[string]any{"event": pullRequestEvent(b)}
	n := 0
	for b.Loop() {
		out, _, err := prg.Eval(act)
		if err != nil || out != types.True {
			b.Fatalf("filter = %v, %v", out, err)
		}
		n++
	}
	reportEvalsPerSecond(b, n)
}

func BenchmarkCompileCached(b *testing.B) {
	env := expr.Default()
	if _, err := env.Compile(prFilter); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := env.Compile(prFilter); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawCELCompile is what every compile would cost without the cache.
func BenchmarkRawCELCompile(b *testing.B) {
	env, err := cel.NewEnv(cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		checked, iss := env.Compile(prFilter)
		if iss.Err() != nil {
			b.Fatal(iss.Err())
		}
		if _, err := env.Program(checked); err != nil {
			b.Fatal(err)
		}
	}
}
