package expr_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/automation/expr"
)

func TestRenderTemplates(t *testing.T) {
	tests := []struct {
		name string
		tmpl string
		want any
	}{
		{"plain text passes through", "no templates here", "no templates here"},
		{"single expression keeps its type", "{{ event.number }}", int64(482)},
		{"single expression with space around it", "  {{ steps.fetch.body }}\n", map[string]any{"ok": true}},
		{"single expression giving a list", "{{event.pull_request.labels.map(l, l.name)}}", []any{"automation", "review-me"}},
		{"interpolation", "PR #{{ event.number }}: {{ event.pull_request.title }}", "PR #482: automation: CEL filters with compile caching"},
		{"objects interpolate as compact JSON", "labels={{ event.pull_request.labels.map(l, l.name) }}", `labels=["automation","review-me"]`},
		{"null interpolates as nothing", "[{{ event.pull_request.merged_at }}]", "[]"},
		{"bools and floats interpolate", "{{ true }}/{{ 2.5 }}/{{ 1e3 }}", "true/2.5/1000"},
		{"closing braces inside a string literal", "{{ '}}' + \"}}\" }}", "}}}}"},
		{"opening braces inside a string literal", `a {{ "{{" }} b`, "a {{ b"},
		{"map literal braces", "{{ {'a': {'b': 1}} }}", map[string]any{"a": map[string]any{"b": int64(1)}}},
		{"triple-quoted string", "{{ '''x }} y''' }}", "x }} y"},
		{"raw string keeps backslashes", `{{ r'a\'}}`, `a\`},
		{"escaped quote inside a string", `{{ 'it\'s }}' }}`, "it's }}"},
		{"lone closing braces are text", "a }} b", "a }} b"},
	}
	env := expr.Default()
	vars := testVars(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := env.Render(tt.tmpl, vars)
			if err != nil {
				t.Fatalf("Render(%q): %v", tt.tmpl, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Render(%q) = %#v, want %#v", tt.tmpl, got, tt.want)
			}
		})
	}
}

func TestTemplateErrorsArePositionedInTheTemplate(t *testing.T) {
	tests := []struct {
		name     string
		tmpl     string
		line     int
		column   int
		contains string
	}{
		{"unclosed", "Hello {{ event.number", 1, 7, "unclosed {{"},
		{"unclosed string literal", "x {{ 'abc }}", 1, 3, "unclosed {{"},
		{"empty", "a {{  }}", 1, 3, "empty"},
		{"undeclared, first line", "x {{ foo }}", 1, 6, "undeclared reference to 'foo'"},
		{"undeclared after a newline in the text", "title\nby {{ who }}", 2, 7, "undeclared reference to 'who'"},
		{"undeclared on the expression's second line", "a\n{{ 1 +\n  foo }}", 3, 3, "undeclared reference to 'foo'"},
		{"syntax error at the end of the second part", "{{ 1 }} and {{ event. }}", 1, 23, "Syntax error"},
	}
	env := expr.Default()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.CheckTemplate(tt.tmpl)
			var ce *expr.Error
			if !errors.As(err, &ce) {
				t.Fatalf("CheckTemplate(%q) = %v, want *expr.Error", tt.tmpl, err)
			}
			if ce.Line != tt.line || ce.Column != tt.column || !strings.Contains(ce.Message, tt.contains) {
				t.Errorf("CheckTemplate(%q) = %d:%d %q, want %d:%d containing %q", tt.tmpl, ce.Line, ce.Column, ce.Message, tt.line, tt.column, tt.contains)
			}
		})
	}
}

func TestRenderMissingKeyNamesTheExpression(t *testing.T) {
	_, err := expr.Default().Render("Hi {{ event.sender.nickname }}!", testVars(t))
	want := `evaluate "event.sender.nickname": no such key: nickname`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestRenderValueWalksNestedValues(t *testing.T) {
	in := map[string]any{
		"url":     "https://api.github.com/repos/{{ event.repository.full_name }}/issues/{{ event.number }}/comments",
		"headers": map[string]any{"Accept": "application/vnd.github+json", "X-Count": "{{ event.pull_request.commits }}"},
		"body":    map[string]any{"labels": []any{"{{ inputs.labels[0] }}", 7, true}, "bad": "{{ event.nope }}"},
	}
	got, err := expr.Default().RenderValue(in, testVars(t))
	want := map[string]any{
		"url":     "https://api.github.com/repos/hangar-dev/hangar/issues/482/comments",
		"headers": map[string]any{"Accept": "application/vnd.github+json", "X-Count": int64(3)},
		"body":    map[string]any{"labels": []any{"review-me", 7, true}, "bad": nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RenderValue = %#v, want %#v", got, want)
	}
	var fes expr.FieldErrors
	if !errors.As(err, &fes) || len(fes) != 1 || !reflect.DeepEqual(fes[0].Path, []any{"body", "bad"}) {
		t.Fatalf("RenderValue error = %v, want one FieldError at body.bad", err)
	}
}

func TestUnknownStepsRenderAsPlaceholders(t *testing.T) {
	vars := testVars(t)
	vars.Steps["summarize"] = map[string]any{"_unknown": true}
	vars.UnknownSteps = []string{"summarize"}
	tests := []struct {
		tmpl string
		want any
	}{
		{"{{ steps.summarize.title }}", expr.Unknown{Expr: "steps.summarize.title"}},
		{"Title: {{ steps.summarize.title }}", "Title: <unknown: steps.summarize.title>"},
		{"{{ has(steps.summarize.title) }}", expr.Unknown{Expr: "has(steps.summarize.title)"}},
		{"{{ steps.fetch.status }}", int64(200)},
	}
	env := expr.Default()
	for _, tt := range tests {
		got, err := env.Render(tt.tmpl, vars)
		if err != nil {
			t.Errorf("Render(%q): %v", tt.tmpl, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Render(%q) = %#v, want %#v", tt.tmpl, got, tt.want)
		}
	}
	b, err := json.Marshal(expr.Unknown{Expr: "steps.x"})
	if err != nil || string(b) != `{"_unknown":true,"expr":"steps.x"}` {
		t.Errorf("Unknown JSON = %s, %v", b, err)
	}
}
