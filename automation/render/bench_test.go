package render_test

import (
	"fmt"
	"os"
	"testing"

	"cel.dev/cel-go/cel"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/render"
)

// tenBlocks is a filter and nine blocks with several templates each, over a pull_request event.
func tenBlocks() definition.Definition {
	def := definition.Definition{
		Version: 1,
		Entrypoints: []definition.Entrypoint{{ID: "pr", Type: definition.EntrypointEvent, EventKey: "github.pull_request.opened",
			Filter: "event.action == 'opened' && !event.pull_request.draft"}},
		Blocks: []definition.Block{{ID: "wanted", Type: definition.BlockFilter, Fields: map[string]any{
			"condition": "event.pull_request.labels.exists(l, l.name == inputs.label)"}}},
	}
	for i := range 9 {
		id := fmt.Sprintf("b%d", i)
		switch i % 3 {
		case 0:
			def.Blocks = append(def.Blocks, definition.Block{ID: id, Type: definition.BlockHTTP, Fields: map[string]any{
				"method":  "POST",
				"url":     "https://api.github.com/repos/{{ event.repository.full_name }}/issues/{{ event.number }}/comments",
				"headers": map[string]any{"Accept": "application/vnd.github+json", "X-Sender": "{{ event.sender.login }}"},
				"body":    map[string]any{"body": "{{ event.pull_request.title }} by {{ event.pull_request.user.login }}", "sha": "{{ event.pull_request.head.sha }}"},
			}})
		case 1:
			def.Blocks = append(def.Blocks, definition.Block{ID: id, Type: definition.BlockTask, Fields: map[string]any{
				"profile_id": "{{ inputs.profile_id }}",
				"title":      "Review {{ event.repository.name }}#{{ event.number }}",
				"prompt":     "Review {{ event.pull_request.html_url }} (+{{ event.pull_request.additions }}/-{{ event.pull_request.deletions }})",
			}})
		case 2:
			def.Blocks = append(def.Blocks, definition.Block{ID: id, Type: definition.BlockPrompt, Fields: map[string]any{
				"session_id": "{{ inputs.session_id }}",
				"prompt":     "{{ event.pull_request.changed_files }} files changed on {{ event.pull_request.base.ref }}",
			}})
		}
	}
	return def
}

func benchScope(b *testing.B) render.Scope {
	payload, err := os.ReadFile("../expr/testdata/pull_request.opened.json")
	if err != nil {
		b.Fatal(err)
	}
	return render.Scope{
		Event:     prEvent(b),
		EventJSON: payload, // TestRender has the payload's bytes at hand
		Inputs:    map[string]any{"label": "review-me", "profile_id": "prof_1", "session_id": "ses_1"},
		Now:       now,
	}
}

func BenchmarkTestRenderTenBlocks(b *testing.B) {
	def, scope := tenBlocks(), benchScope(b)
	if _, errs := render.Render(def, scope, render.Options{}); len(errs) > 0 {
		b.Fatal(errs)
	}
	n := 0
	for b.Loop() {
		render.Render(def, scope, render.Options{})
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "renders/s")
}

// BenchmarkRenderRawTemplates is the baseline: every expression of the same automation as a
// compiled cel-go program evaluated once, with nothing around it.
func BenchmarkRenderRawTemplates(b *testing.B) {
	def, scope := tenBlocks(), benchScope(b)
	sources := []string{def.Entrypoints[0].Filter}
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case string:
			t, err := expr.Default().ParseTemplate(v)
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range t.Programs() {
				sources = append(sources, p.Source())
			}
		case map[string]any:
			for _, e := range v {
				collect(e)
			}
		}
	}
	for _, blk := range def.Blocks {
		if c, ok := blk.Fields["condition"]; ok {
			sources = append(sources, c.(string))
			continue
		}
		collect(blk.Fields)
	}
	dynMap := cel.MapType(cel.StringType, cel.DynType)
	env, err := cel.NewEnv(cel.Variable("event", dynMap), cel.Variable("inputs", dynMap))
	if err != nil {
		b.Fatal(err)
	}
	programs := make([]cel.Program, len(sources))
	for i, src := range sources {
		checked, iss := env.Compile(src)
		if iss.Err() != nil {
			b.Fatal(iss.Err())
		}
		if programs[i], err = env.Program(checked); err != nil {
			b.Fatal(err)
		}
	}
	act := map[string]any{"event": scope.Event, "inputs": scope.Inputs}
	b.ReportMetric(float64(len(programs)), "exprs")
	for b.Loop() {
		for _, p := range programs {
			if _, _, err := p.Eval(act); err != nil {
				b.Fatal(err)
			}
		}
	}
}
