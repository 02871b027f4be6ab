package render_test

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/render"
)

var now = time.Date(2026, 3, 3, 8, 16, 0, 0, time.UTC)

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

func prEvent(t testing.TB) map[string]any {
	var event map[string]any
	readJSON(t, "../expr/testdata/pull_request.opened.json", &event)
	return event
}

func prReview(t testing.TB) definition.Definition {
	t.Helper()
	data, err := os.ReadFile("../definition/testdata/pr_review.json")
	if err != nil {
		t.Fatal(err)
	}
	def, errs := definition.Validator{Exprs: expr.Default()}.Load(data)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return def
}

func prScope(t testing.TB, def definition.Definition, inputsJSON string) render.Scope {
	t.Helper()
	inputs, errs := definition.ValidateInputs(def.Inputs, []byte(inputsJSON))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return render.Scope{Event: prEvent(t), Inputs: inputs, Now: now}
}

// decoded is a BlockRender with its JSON read back.
type decoded struct {
	render.BlockRender
	render.Rendered
	Scope map[string]any
}

func decode(t *testing.T, brs []render.BlockRender) map[string]decoded {
	t.Helper()
	out := map[string]decoded{}
	for _, br := range brs {
		d := decoded{BlockRender: br}
		if err := json.Unmarshal(br.RenderedJSON, &d.Rendered); err != nil {
			t.Fatalf("%s rendered_json: %v", br.BlockID, err)
		}
		if err := json.Unmarshal(br.ScopeJSON, &d.Scope); err != nil {
			t.Fatalf("%s scope_json: %v", br.BlockID, err)
		}
		out[br.BlockID] = d
	}
	return out
}

func TestRenderThePRReviewAutomation(t *testing.T) {
	def := prReview(t)
	brs, errs := render.Render(def, prScope(t, def, `{"profile_id": "prof_reviewer"}`), render.Options{})
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	var ids []string
	for _, br := range brs {
		ids = append(ids, br.BlockID)
	}
	wantIDs := []string{"entrypoint:pr_opened", "wanted", "open", "ack", "review", "remember", "settle", "nudge", "done"}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Fatalf("blocks = %v, want %v", ids, wantIDs)
	}
	got := decode(t, brs)

	ep := got["entrypoint:pr_opened"]
	if ep.BlockType != render.EntrypointType || ep.FilterPass == nil || !*ep.FilterPass || ep.Fields["instance_key"] != "hangar-dev/hangar#482" {
		t.Errorf("entrypoint = %+v", ep)
	}
	if wanted := got["wanted"]; wanted.FilterPass == nil || !*wanted.FilterPass || !reflect.DeepEqual(wanted.Output, map[string]any{"pass": true}) {
		t.Errorf("filter block = %+v", wanted)
	}

	ack := got["ack"]
	wantAck := map[string]any{
		"method":         "POST",
		"url":            "https://api.github.com/repos/hangar-dev/hangar/issues/482/comments",
		"headers":        map[string]any{"Accept": "application/vnd.github+json", "X-Hangar-Run": "hangar-dev/hangar#482"},
		"secret_headers": map[string]any{"Authorization": "GITHUB_TOKEN"},
		"body":           map[string]any{"body": "Review requested for #482 by @ada-l"},
		"expect_status":  []any{201.0},
		"timeout":        "10s",
	}
	if !reflect.DeepEqual(ack.Fields, wantAck) {
		t.Errorf("ack fields = %#v\nwant %#v", ack.Fields, wantAck)
	}
	if !reflect.DeepEqual(ack.Output, map[string]any{"_unknown": true, "would": "POST " + wantAck["url"].(string)}) || !ack.Reached {
		t.Errorf("ack output = %#v, reached %v", ack.Output, ack.Reached)
	}

	review := got["review"]
	wantPrompt := "Review https://github.com/hangar-dev/hangar/pull/482 (9 files, +412/-37). Head 9f3c2b1e7d6a5f4e3d2c1b0a99887766554433ab."
	if review.Fields["prompt"] != wantPrompt || review.Fields["title"] != "Review hangar#482" || review.Fields["profile_id"] != "prof_reviewer" {
		t.Errorf("review fields = %#v", review.Fields)
	}
	steps := review.Scope["steps"].(map[string]any)
	if _, ok := steps["ack"]; !ok || review.Scope["now"] != "2026-03-03T08:16:00Z" || review.Scope["instance"].(map[string]any)["key"] != "hangar-dev/hangar#482" {
		t.Errorf("review scope = %v", review.Scope)
	}

	remember := got["remember"]
	if !reflect.DeepEqual(remember.Fields["value"], map[string]any{"_unknown": true, "expr": "steps.review.session_id"}) ||
		len(remember.Notes) != 1 || !strings.Contains(remember.Notes[0], "steps.review") {
		t.Errorf("remember = %#v, notes %v", remember.Fields, remember.Notes)
	}
	if done := got["done"]; done.Fields["reason"] != "reviewed 9f3c2b1" || got["settle"].Output.(map[string]any)["would"] != "wait 5m" {
		t.Errorf("done = %#v, settle = %#v", done.Fields, got["settle"].Output)
	}
}

func TestRenderFilters(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(scope *render.Scope)
		entrypoint bool
		wanted     bool
	}{
		{"both pass", func(*render.Scope) {}, true, true},
		{"entrypoint filter false", func(s *render.Scope) {
			s.Event["pull_request"].(map[string]any)["draft"] = true
		}, false, true},
		{"block filter false", func(s *render.Scope) { s.Inputs["review_label"] = "urgent" }, true, false},
	}
	def := prReview(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scope := prScope(t, def, `{"profile_id": "p"}`)
			tt.edit(&scope)
			brs, errs := render.Render(def, scope, render.Options{})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got := decode(t, brs)
			if *got["entrypoint:pr_opened"].FilterPass != tt.entrypoint || *got["wanted"].FilterPass != tt.wanted {
				t.Errorf("filters = %v, %v; want %v, %v", *got["entrypoint:pr_opened"].FilterPass, *got["wanted"].FilterPass, tt.entrypoint, tt.wanted)
			}
			for _, id := range []string{"ack", "done"} {
				b := got[id]
				wantReached := tt.entrypoint && tt.wanted
				if b.Reached != wantReached || b.Fields["method"] == nil && id == "ack" {
					t.Errorf("%s reached = %v, want %v (fields %v)", id, b.Reached, wantReached, b.Fields)
				}
				if !wantReached && (len(b.Notes) == 0 || !strings.HasPrefix(b.Notes[0], "not reached")) {
					t.Errorf("%s notes = %v", id, b.Notes)
				}
			}
		})
	}
}

func TestRenderCodeBlocks(t *testing.T) {
	def := definition.Definition{
		Version:     1,
		Entrypoints: []definition.Entrypoint{{ID: "manual", Type: definition.EntrypointManual}},
		Blocks: []definition.Block{
			{ID: "shape", Type: definition.BlockCode, Fields: map[string]any{"source": "return {title: event.title.toUpperCase()}"}},
			{ID: "post", Type: definition.BlockTask, Fields: map[string]any{"profile_id": "p", "prompt": "Title: {{ steps.shape.title }}"}},
		},
	}
	scope := render.Scope{Event: map[string]any{"title": "fix"}, Now: now}
	upper := func(source string, s render.Scope) (any, error) {
		if !strings.Contains(source, "toUpperCase") {
			return nil, errors.New("unexpected source")
		}
		return map[string]any{"title": strings.ToUpper(s.Event["title"].(string))}, nil
	}
	tests := []struct {
		name   string
		run    render.CodeRunner
		prompt string
		notes  int
	}{
		{"with a runner the output is known", upper, "Title: FIX", 0},
		{"without one it is a placeholder", nil, "Title: <unknown: steps.shape.title>", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brs, errs := render.Render(def, scope, render.Options{RunCode: tt.run})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			post := decode(t, brs)["post"]
			if post.Fields["prompt"] != tt.prompt || len(post.Notes) != tt.notes {
				t.Errorf("post = %#v, notes %v", post.Fields, post.Notes)
			}
		})
	}
}

func TestRenderReportsErrorsByField(t *testing.T) {
	base := func(fields map[string]any) definition.Definition {
		return definition.Definition{
			Version:     1,
			Entrypoints: []definition.Entrypoint{{ID: "pr", Type: definition.EntrypointEvent, EventKey: "github.pull_request.opened"}},
			Blocks:      []definition.Block{{ID: "call", Type: definition.BlockHTTP, Fields: fields}},
		}
	}
	tests := []struct {
		name string
		def  definition.Definition
		opts render.Options
		want definition.BlockError
	}{
		{"missing key names the expression", base(map[string]any{"url": "https://x.test/{{ event.pull_request.nope }}"}), render.Options{},
			definition.BlockError{BlockID: "call", Field: "url", Code: definition.CodeEval, Message: `evaluate "event.pull_request.nope": no such key: nope`}},
		{"template syntax error has its position", base(map[string]any{"url": "https://x.test", "headers": map[string]any{"X-N": "n={{ event.number + }}"}}), render.Options{},
			definition.BlockError{BlockID: "call", Field: "headers.X-N", Code: definition.CodeTemplate, Message: "1:21: Syntax error"}},
		{"rendered value of the wrong form", base(map[string]any{"url": "https://x.test", "timeout": "{{ event.pull_request.title }}"}), render.Options{},
			definition.BlockError{BlockID: "call", Field: "timeout", Code: definition.CodeInvalid, Message: "must be a duration"}},
		{"unknown entrypoint", base(map[string]any{"url": "https://x.test"}), render.Options{EntrypointID: "nightly"},
			definition.BlockError{Field: "entrypoint_id", Code: definition.CodeReference, Message: `no entrypoint "nightly"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brs, errs := render.Render(tt.def, render.Scope{Event: prEvent(t), Now: now}, tt.opts)
			if len(errs) != 1 {
				t.Fatalf("errors = %v, want one", errs)
			}
			e := errs[0]
			if e.BlockID != tt.want.BlockID || e.Field != tt.want.Field || e.Code != tt.want.Code || !strings.Contains(e.Message, tt.want.Message) {
				t.Errorf("error = %+v, want %+v", e, tt.want)
			}
			if len(brs) != 2 {
				t.Errorf("rendered %d blocks, want the entrypoint and the block", len(brs))
			}
		})
	}
}

func TestRenderFollowsNeeds(t *testing.T) {
	def := definition.Definition{
		Version:     1,
		Entrypoints: []definition.Entrypoint{{ID: "go", Type: definition.EntrypointManual}},
		Blocks: []definition.Block{
			{ID: "first", Type: definition.BlockDelay, Fields: map[string]any{"duration": "1s"}},
			{ID: "last", Type: definition.BlockDelay, Needs: []string{"middle"}, Fields: map[string]any{"duration": "3s"}},
			{ID: "middle", Type: definition.BlockDelay, Needs: []string{"first"}, Fields: map[string]any{"duration": "2s"}},
		},
	}
	brs, errs := render.Render(def, render.Scope{Now: now}, render.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var ids []string
	for _, br := range brs {
		ids = append(ids, br.BlockID)
	}
	if want := []string{"entrypoint:go", "first", "middle", "last"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("order = %v, want %v", ids, want)
	}
	if brs[0].FilterPass != nil {
		t.Error("an entrypoint without a filter reported a filter result")
	}
}
