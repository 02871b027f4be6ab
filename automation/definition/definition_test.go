package definition_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
)

// checkScript stands in for jsbox's syntax check, which lives in another package: it reports an
// unbalanced brace with the line it is on.
func checkScript(source string) (int, string, bool) {
	depth := 0
	for i, line := range strings.Split(source, "\n") {
		depth += strings.Count(line, "{") - strings.Count(line, "}")
		if depth < 0 {
			return i + 1, "Unexpected token '}'", false
		}
	}
	if depth > 0 {
		return strings.Count(source, "\n") + 1, "Unexpected end of input", false
	}
	return 0, "", true
}

func checkCron(spec string) error {
	if strings.HasPrefix(spec, "61 ") {
		return errors.New("minute 61 is out of range 0-59")
	}
	return nil
}

var validator = definition.Validator{Exprs: expr.Default(), Script: checkScript, Cron: checkCron}

func prReviewJSON(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/pr_review.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mutated returns the PR review definition changed by edit, which works on its JSON tree.
func mutated(t *testing.T, edit func(def map[string]any)) []byte {
	t.Helper()
	var def map[string]any
	if err := json.Unmarshal(prReviewJSON(t), &def); err != nil {
		t.Fatal(err)
	}
	edit(def)
	data, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func block(def map[string]any, i int) map[string]any {
	return def["blocks"].([]any)[i].(map[string]any)
}
func entrypoint(def map[string]any, i int) map[string]any {
	return def["entrypoints"].([]any)[i].(map[string]any)
}

// want is the part of a BlockError a test pins; message is a substring.
type want struct {
	blockID, field, code, message string
}

func assertErrors(t *testing.T, got []definition.BlockError, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d errors %v, want %d: %+v", len(got), got, len(wants), wants)
	}
	for i, w := range wants {
		g := got[i]
		if g.BlockID != w.blockID || g.Field != w.field || g.Code != w.code || !strings.Contains(g.Message, w.message) {
			t.Errorf("error %d = {%q %q %q %q}, want {%q %q %q ~%q}", i, g.BlockID, g.Field, g.Code, g.Message, w.blockID, w.field, w.code, w.message)
		}
	}
}

func TestLoadAcceptsThePRReviewAutomation(t *testing.T) {
	def, errs := validator.Load(prReviewJSON(t))
	if len(errs) > 0 {
		t.Fatalf("Load: %v", errs)
	}
	if len(def.Blocks) != 8 || def.Blocks[2].Fields["method"] != "POST" || def.Instance == nil {
		t.Errorf("Load read %+v", def)
	}
}

func TestLoadReportsEachProblemWhereItIs(t *testing.T) {
	tests := []struct {
		name string
		json []byte
		want []want
	}{
		{"bad JSON names the offset", []byte(`{"version": 1, "blocks": [}`),
			[]want{{"", "definition_json", definition.CodeJSON, "offset 27"}}},
		{"not an object", []byte(`[1]`),
			[]want{{"", "definition_json", definition.CodeType, "object"}}},
		{"unknown top-level key", mutated(t, func(d map[string]any) { d["triggers"] = []any{} }),
			[]want{{"", "triggers", definition.CodeUnknownField, "triggers"}}},
		{"unknown entrypoint key", mutated(t, func(d map[string]any) { entrypoint(d, 0)["when"] = "now" }),
			[]want{{"", "entrypoints[0]", definition.CodeUnknownField, `"when"`}}},
		{"needs of the wrong type", mutated(t, func(d map[string]any) { block(d, 3)["needs"] = "open" }),
			[]want{{"review", "blocks[3].needs", definition.CodeType, "list"}}},
		{"unknown retry key", mutated(t, func(d map[string]any) { block(d, 2)["retry"] = map[string]any{"tries": 3} }),
			[]want{{"ack", "blocks[2]", definition.CodeUnknownField, `"tries"`}}},
		{"version 2", mutated(t, func(d map[string]any) { d["version"] = 2 }),
			[]want{{"", "version", definition.CodeInvalid, "must be 1"}}},
		{"no entrypoints", mutated(t, func(d map[string]any) { d["entrypoints"] = []any{} }),
			[]want{{"", "entrypoints", definition.CodeRequired, "at least one"}}},
		{"no blocks", mutated(t, func(d map[string]any) { d["blocks"] = []any{} }),
			[]want{{"", "blocks", definition.CodeRequired, "at least one"}}},
		{"entrypoint id shape and duplicates", mutated(t, func(d map[string]any) {
			entrypoint(d, 1)["id"] = "Nightly"
			entrypoint(d, 2)["id"] = "pr_opened"
		}), []want{
			{"", "entrypoints[1].id", definition.CodeInvalid, "lowercase"},
			{"", "entrypoints[2].id", definition.CodeDuplicate, "pr_opened"},
		}},
		{"event key shape", mutated(t, func(d map[string]any) { entrypoint(d, 0)["event_key"] = "github" }),
			[]want{{"", "entrypoints[0].event_key", definition.CodeInvalid, "provider.event"}}},
		{"entrypoint filter that does not compile", mutated(t, func(d map[string]any) { entrypoint(d, 0)["filter"] = "event.action == " }),
			[]want{{"", "entrypoints[0].filter", definition.CodeCEL, "1:17: Syntax error"}}},
		{"entrypoint filter that is not a condition", mutated(t, func(d map[string]any) { entrypoint(d, 0)["filter"] = "event.action + '!'" }),
			[]want{{"", "entrypoints[0].filter", definition.CodeCEL, "must give a bool"}}},
		{"schedule checks", mutated(t, func(d map[string]any) {
			entrypoint(d, 1)["cron"] = "0 3 * *"
			entrypoint(d, 1)["time_zone"] = "Mars/Olympus"
			entrypoint(d, 2)["cron"] = "* * * * *"
		}), []want{
			{"", "entrypoints[1].cron", definition.CodeInvalid, "five fields"},
			{"", "entrypoints[1].time_zone", definition.CodeInvalid, "IANA"},
			{"", "entrypoints[2].cron", definition.CodeInvalid, "manual entrypoints have no cron"},
		}},
		{"fields an entrypoint type does not take, in a stable order", mutated(t, func(d map[string]any) {
			entrypoint(d, 2)["time_zone"] = "UTC"
			entrypoint(d, 2)["cron"] = "* * * * *"
			entrypoint(d, 2)["event_key"] = "github.push"
		}), []want{
			{"", "entrypoints[2].event_key", definition.CodeInvalid, "manual entrypoints have no event_key"},
			{"", "entrypoints[2].cron", definition.CodeInvalid, "manual entrypoints have no cron"},
			{"", "entrypoints[2].time_zone", definition.CodeInvalid, "manual entrypoints have no time_zone"},
		}},
		{"cron checker", mutated(t, func(d map[string]any) { entrypoint(d, 1)["cron"] = "61 3 * * *" }),
			[]want{{"", "entrypoints[1].cron", definition.CodeInvalid, "minute 61"}}},
		{"inputs", mutated(t, func(d map[string]any) {
			inputs := d["inputs"].([]any)
			inputs[1].(map[string]any)["key"] = "profile_id"
			inputs[2].(map[string]any)["default"] = "twenty"
			d["inputs"] = append(inputs, map[string]any{"key": "when", "type": "date"})
		}), []want{
			{"", "inputs[1].key", definition.CodeDuplicate, "profile_id"},
			{"", "inputs[2].default", definition.CodeType, "number"},
			{"", "inputs[3].type", definition.CodeInvalid, "string"},
		}},
		{"instance key that does not compile", mutated(t, func(d map[string]any) {
			d["instance"] = map[string]any{"key": "event.repository.full_name +"}
		}), []want{{"", "instance.key", definition.CodeCEL, "1:29"}}},
		{"block ids", mutated(t, func(d map[string]any) {
			block(d, 1)["id"] = "Open-It"
			block(d, 2)["id"] = "wanted"
		}), []want{
			{"Open-It", "id", definition.CodeInvalid, "lowercase"},
			{"wanted", "id", definition.CodeDuplicate, "wanted"},
			{"review", "needs[0]", definition.CodeReference, `no block "open"`},
		}},
		{"unknown block type", mutated(t, func(d map[string]any) { block(d, 5)["type"] = "email" }),
			[]want{{"settle", "type", definition.CodeInvalid, "email"}}},
		{"http fields", mutated(t, func(d map[string]any) {
			b := block(d, 2)
			delete(b, "url")
			b["method"] = "FETCH"
			b["verb"] = "POST"
			b["timeout"] = "2m"
			b["headers"].(map[string]any)["Authorization"] = "Bearer {{ inputs.token"
			b["secret_headers"] = map[string]any{"X-Key": "{{ inputs.secret }}"}
			b["expect_status"] = []any{201, 99}
			b["body"] = map[string]any{"items": []any{"ok", "{{ event.number + }}"}}
		}), []want{
			{"ack", "verb", definition.CodeUnknownField, "verb"},
			{"ack", "method", definition.CodeInvalid, "GET, POST"},
			{"ack", "url", definition.CodeRequired, "required"},
			{"ack", "headers.Authorization", definition.CodeTemplate, "1:8: unclosed {{"},
			{"ack", "body.items[1]", definition.CodeTemplate, "1:19: Syntax error"},
			{"ack", "secret_headers.X-Key", definition.CodeInvalid, "never templated"},
			{"ack", "expect_status[1]", definition.CodeInvalid, "100-599"},
			{"ack", "timeout", definition.CodeInvalid, "at most 1m"},
		}},
		{"http url must be absolute http(s)", mutated(t, func(d map[string]any) { block(d, 2)["url"] = "ftp://example.com/x" }),
			[]want{{"ack", "url", definition.CodeInvalid, "http or https"}}},
		{"templated url and method are checked as templates", mutated(t, func(d map[string]any) {
			block(d, 2)["url"] = "{{ inputs.url }}"
			block(d, 2)["method"] = "{{ nope }}"
		}), []want{{"ack", "method", definition.CodeTemplate, "undeclared reference to 'nope'"}}},
		{"filter condition", mutated(t, func(d map[string]any) { block(d, 0)["condition"] = "size(event.pull_request.labels)" }),
			[]want{{"wanted", "condition", definition.CodeCEL, "must give a bool"}}},
		{"code source", mutated(t, func(d map[string]any) {
			d["blocks"] = append(d["blocks"].([]any), map[string]any{"id": "shape", "type": "code", "source": "return {\n  a: 1,\n"})
		}), []want{{"shape", "source", definition.CodeScript, "line 3: Unexpected end of input"}}},
		{"task timeout without wait", mutated(t, func(d map[string]any) { block(d, 3)["timeout"] = "1h" }),
			[]want{{"review", "timeout", definition.CodeInvalid, "only when wait"}}},
		{"task wait must be a bool", mutated(t, func(d map[string]any) { block(d, 3)["wait"] = "yes" }),
			[]want{{"review", "wait", definition.CodeType, "true or false"}}},
		{"instance actions", mutated(t, func(d map[string]any) {
			delete(block(d, 4), "value")
			block(d, 1)["reason"] = "why not"
			block(d, 7)["action"] = "reopen"
		}), []want{
			{"open", "reason", definition.CodeInvalid, "does not apply to action open"},
			{"remember", "value", definition.CodeRequired, "required for action write_handle"},
			{"done", "action", definition.CodeInvalid, "open, write_handle, close"},
		}},
		{"instance blocks need instance.key", mutated(t, func(d map[string]any) {
			delete(d, "instance")
			d["blocks"] = d["blocks"].([]any)[:2]
		}), []want{
			{"open", "action", definition.CodeInvalid, "instance.key"},
		}},
		{"delay", mutated(t, func(d map[string]any) {
			block(d, 5)["duration"] = "48h"
			d["blocks"] = append(d["blocks"].([]any), map[string]any{"id": "later", "type": "delay",
				"duration": "1m", "until": "2026-01-01T00:00:00Z"})
		}), []want{
			{"settle", "duration", definition.CodeInvalid, "at most 24h"},
			{"later", "duration", definition.CodeRequired, "exactly one of duration, until"},
		}},
		{"needs an unknown block", mutated(t, func(d map[string]any) { block(d, 3)["needs"] = []any{"opn"} }),
			[]want{{"review", "needs[0]", definition.CodeReference, `no block "opn"`}}},
		{"needs in a cycle", mutated(t, func(d map[string]any) { block(d, 1)["needs"] = []any{"remember"} }),
			[]want{{"open", "needs", definition.CodeCycle, "open → remember → review → open"}}},
		{"a block needing itself", mutated(t, func(d map[string]any) { block(d, 5)["needs"] = []any{"settle"} }),
			[]want{{"settle", "needs[0]", definition.CodeCycle, "itself"}}},
		{"retry policy", mutated(t, func(d map[string]any) {
			block(d, 2)["retry"] = map[string]any{"max_attempts": 50, "backoff": "2h"}
		}), []want{
			{"ack", "retry.max_attempts", definition.CodeInvalid, "between 1 and 10"},
			{"ack", "retry.backoff", definition.CodeInvalid, "at most 1h"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := validator.Load(tt.json)
			assertErrors(t, errs, tt.want)
		})
	}
}

func TestOrder(t *testing.T) {
	blocks := func(needs ...[]string) []definition.Block {
		out := make([]definition.Block, len(needs))
		for i, n := range needs {
			out[i] = definition.Block{ID: string(rune('a' + i)), Needs: n}
		}
		return out
	}
	tests := []struct {
		name   string
		blocks []definition.Block
		want   []int
		cycle  bool
	}{
		{"without needs, declaration order", blocks(nil, nil, nil), []int{0, 1, 2}, false},
		{"needs a later block", blocks(nil, []string{"c"}, []string{"a"}), []int{0, 2, 1}, false},
		{"fan out keeps declaration order for ties", blocks(nil, []string{"a"}, []string{"a"}, []string{"b", "c"}), []int{0, 1, 2, 3}, false},
		{"cycle puts the stuck blocks last", blocks(nil, []string{"c"}, []string{"b"}), []int{0, 1, 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := definition.Order(tt.blocks)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Order = %v, want %v", got, tt.want)
			}
			if hasCycle := len(errs) > 0 && errs[0].Code == definition.CodeCycle; hasCycle != tt.cycle {
				t.Errorf("errors = %v, want cycle=%v", errs, tt.cycle)
			}
		})
	}
}

func TestSecretNamesListsEverySecretHeaderOnce(t *testing.T) {
	def, errs := definition.Parse([]byte(`{"version":1,"entrypoints":[{"id":"go","type":"manual"}],"blocks":[
		{"id":"a","type":"http","url":"https://api.example.com","secret_headers":{"Authorization":"org/token","X-Other":"org/b"}},
		{"id":"b","type":"http","url":"https://api.example.com","secret_headers":{"Authorization":"org/token"}},
		{"id":"c","type":"http","url":"https://api.example.com","headers":{"X-Plain":"org/not-a-secret"}}]}`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := def.SecretNames(); !slices.Equal(got, []string{"org/b", "org/token"}) {
		t.Fatalf("SecretNames() = %v", got)
	}
}
