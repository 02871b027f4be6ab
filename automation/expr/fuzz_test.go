package expr_test

import (
	"errors"
	"testing"

	"github.com/hangar-dev/hangar/automation/expr"
)

// FuzzTemplate feeds `{{ }}` templates and CEL conditions as automation authors write them:
// parsing answers a template or an *expr.Error positioned at a line and column that exist, and
// rendering against a real event answers a value or an error, never a panic.
func FuzzTemplate(f *testing.F) {
	for _, seed := range []string{
		"no templates here", "{{ event.number }}", "PR #{{ event.number }}: {{ event.pull_request.title }}",
		"{{event.pull_request.labels.map(l, l.name)}}", "{{ '}}' + \"}}\" }}", `a {{ "{{" }} b`,
		"{{ {'a': {'b': 1}} }}", "{{ '''x }} y''' }}", `{{ r'a\'}}`, `{{ 'it\'s }}' }}`, "a }} b",
		"{{", "{{ }}", "{{ event. }}", "line\n{{ 1 + }}", "{{ steps.fetch.body.ok && inputs.labels.size() > 0 }}",
		"{{ now - duration('1h') }}", "{{ [1,2,3].all(x, x > 0) }}", "{{ 'a'.matches('(') }}", "{{ 1/0 }}",
		"{{ event.missing.key }}", "{{ \"\\u00e9\" }}", "{{ b'\\xff' }}",
	} {
		f.Add(seed)
	}
	env := expr.Default()
	vars := testVars(f)
	f.Fuzz(func(t *testing.T, tmpl string) {
		if err := env.CheckTemplate(tmpl); err != nil {
			var pe *expr.Error
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Column < 1 {
				t.Fatalf("CheckTemplate(%q) = %v, want an *expr.Error with a position", tmpl, err)
			}
			return
		}
		_, _ = env.Render(tmpl, vars)
		if err := env.CheckCondition(tmpl); err == nil {
			_, _ = env.Eval(tmpl, vars)
		}
	})
}
