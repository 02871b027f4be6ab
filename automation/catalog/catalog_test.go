package catalog

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/automation/definition"
)

// maxSampleBytes keeps samples to "a few KB": enough to show the real shape, small enough to
// send in every ListEventCatalog answer.
const maxSampleBytes = 8 << 10

func allEvents() []Event {
	var out []Event
	for _, p := range Providers() {
		out = append(out, p.Events...)
	}
	return out
}

func TestEverySampleIsValidJSONMatchingItsSchema(t *testing.T) {
	for _, e := range allEvents() {
		t.Run(e.Key, func(t *testing.T) {
			var schema map[string]any
			if err := json.Unmarshal([]byte(e.SchemaJSON), &schema); err != nil {
				t.Fatalf("schema is not a JSON object: %v", err)
			}
			var sample any
			if err := json.Unmarshal([]byte(e.SampleJSON), &sample); err != nil {
				t.Fatalf("sample is not JSON: %v", err)
			}
			if _, ok := sample.(map[string]any); !ok {
				t.Fatalf("sample is a %T, want an object", sample)
			}
			if schema["type"] != "object" || len(schema["required"].([]any)) == 0 {
				t.Errorf("schema must be an object schema with required fields, got type %v required %v", schema["type"], schema["required"])
			}
			for _, problem := range validate("$", schema, sample) {
				t.Error(problem)
			}
			if n := len(e.SampleJSON); n > maxSampleBytes {
				t.Errorf("sample is %d bytes, want at most %d", n, maxSampleBytes)
			}
		})
	}
}

// validate checks v against the parts of JSON Schema the catalog uses: type (one or a list),
// const, enum, required, properties, additionalProperties and items.
func validate(path string, schema map[string]any, v any) []string {
	var problems []string
	if types := schemaTypes(schema["type"]); len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return isType(t, v) }) {
		return []string{fmt.Sprintf("%s: %v is not of type %v", path, v, types)}
	}
	if c, ok := schema["const"]; ok && c != v {
		problems = append(problems, fmt.Sprintf("%s: %v is not the constant %v", path, v, c))
	}
	if values, ok := schema["enum"].([]any); ok && !slices.Contains(values, v) {
		problems = append(problems, fmt.Sprintf("%s: %v is not one of %v", path, v, values))
	}
	switch v := v.(type) {
	case map[string]any:
		for _, r := range asList(schema["required"]) {
			if _, ok := v[r.(string)]; !ok {
				problems = append(problems, fmt.Sprintf("%s: required field %q is missing", path, r))
			}
		}
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		for k, fv := range v {
			if ps, ok := props[k].(map[string]any); ok {
				problems = append(problems, validate(path+"."+k, ps, fv)...)
			} else if extra != nil {
				problems = append(problems, validate(path+"."+k, extra, fv)...)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, item := range v {
				problems = append(problems, validate(fmt.Sprintf("%s[%d]", path, i), items, item)...)
			}
		}
	}
	return problems
}

func schemaTypes(t any) []string {
	switch t := t.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, len(t))
		for i, x := range t {
			out[i] = x.(string)
		}
		return out
	}
	return nil
}

func asList(v any) []any {
	list, _ := v.([]any)
	return list
}

func isType(name string, v any) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	case "number":
		_, ok := v.(float64)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func TestValidateCatchesMismatches(t *testing.T) {
	// The schema check above is only as good as validate; make sure it fails when it should.
	schema := map[string]any{}
	if err := json.Unmarshal([]byte(mustJSON(object(obj{
		"action": constant("opened", ""),
		"state":  orNull(enum("", "open", "closed")),
		"n":      integer(""),
		"labels": arrayOf(object(obj{"name": str("")}, "name"), ""),
	}, "action", "n"))), &schema); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		sample string
		want   int
	}{
		{`{"action":"opened","n":1,"state":null,"labels":[{"name":"bug"}]}`, 0},
		{`{"action":"closed","n":1}`, 1},
		{`{"action":"opened"}`, 1},
		{`{"action":"opened","n":1.5}`, 1},
		{`{"action":"opened","n":1,"state":"merged"}`, 1},
		{`{"action":"opened","n":1,"labels":[{"color":"red"}]}`, 1},
		{`[]`, 1},
	}
	for _, tt := range tests {
		var v any
		if err := json.Unmarshal([]byte(tt.sample), &v); err != nil {
			t.Fatal(err)
		}
		if got := validate("$", schema, v); len(got) != tt.want {
			t.Errorf("validate(%s) = %v, want %d problems", tt.sample, got, tt.want)
		}
	}
}

func TestEventKeysAreUniqueAndNamedAfterTheirProvider(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Providers() {
		if p.Label == "" || len(p.Events) == 0 {
			t.Errorf("provider %q needs a label and events", p.Name)
		}
		for _, e := range p.Events {
			if seen[e.Key] {
				t.Errorf("key %q appears twice", e.Key)
			}
			seen[e.Key] = true
			if !strings.HasPrefix(e.Key, p.Name+".") {
				t.Errorf("key %q does not start with %q", e.Key, p.Name+".")
			}
			if e.Label == "" || e.Description == "" || e.subject == "" || e.predicate == "" {
				t.Errorf("%s: label, description and summary clause are all needed", e.Key)
			}
		}
		aliases := map[string]bool{}
		for _, v := range p.Variables {
			if aliases[v.Alias] || v.Path == "" {
				t.Errorf("%s: variable %+v repeats an alias or has no path", p.Name, v)
			}
			aliases[v.Alias] = true
		}
	}
}

func TestGitHubCatalogCoversTheCommonEvents(t *testing.T) {
	want := []string{
		"github.pull_request.opened", "github.pull_request.synchronize", "github.pull_request.closed",
		"github.pull_request.reopened", "github.pull_request.ready_for_review", "github.issue_comment.created",
		"github.issues.opened", "github.issues.closed", "github.issues.labeled", "github.push",
		"github.pull_request_review.submitted", "github.check_run.completed", "github.workflow_run.completed",
		"github.release.published",
	}
	for _, key := range want {
		e, ok := LookupEvent(key)
		if !ok {
			t.Errorf("%s is missing", key)
			continue
		}
		if e.Hidden {
			t.Errorf("%s is hidden", key)
		}
	}
	if e, _ := LookupEvent("github.ping"); !e.Hidden {
		t.Error("github.ping should be hidden")
	}
}

func TestGitHubSamplesDeriveTheirOwnKey(t *testing.T) {
	p, _ := LookupProvider(ProviderGitHub)
	for _, e := range p.Events {
		header := strings.Split(e.Key, ".")[1]
		if got, err := EventKey(header, []byte(e.SampleJSON)); err != nil || got != e.Key {
			t.Errorf("EventKey(%q, sample of %s) = %q", header, e.Key, got)
		}
	}
}

func TestEventKeyAddsTheActionAndRefusesWhatIsNotGitHubShaped(t *testing.T) {
	tests := []struct {
		name, header, payload, want string
	}{
		{"event with action", "pull_request", `{"action":"opened","number":1}`, "github.pull_request.opened"},
		{"event without action", "push", `{"ref":"refs/heads/main"}`, "github.push"},
		{"empty action", "push", `{"action":""}`, "github.push"},
		{"action not a string", "deployment", `{"action":5}`, "github.deployment"},
		{"nested action only", "workflow_job", `{"workflow_job":{"action":"x"}}`, "github.workflow_job"},
		{"header with spaces", " issues ", `{"action":"labeled"}`, "github.issues.labeled"},
		{"payload not an object", "ping", `[1,2]`, ""},
		{"payload not JSON", "ping", `zen=1`, ""},
		{"no payload", "ping", ``, ""},
		{"no header", "", `{"action":"opened"}`, ""},
		{"a forged event name", "pull_request.opened", `{}`, ""},
		{"a forged action", "pull_request", `{"action":"opened.x"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EventKey(tt.header, []byte(tt.payload))
			if got != tt.want || (err != nil) != (tt.want == "") {
				t.Errorf("EventKey(%q, %s) = %q, %v; want %q", tt.header, tt.payload, got, err, tt.want)
			}
		})
	}
}

func TestLookupEventAnswersWebhookRegistrationKeys(t *testing.T) {
	tests := []struct {
		key       string
		wantOK    bool
		wantLabel string
	}{
		{"github.push", true, "Push"},
		{"schedule.fired", true, "Schedule fired"},
		{"webhook.received", true, "Webhook received"},
		{"webhook.whk_01hwz3k8q4m2v7c9d5e6f7g8h9", true, "Webhook received"},
		{"webhook.", false, ""},
		{"github.deployment.created", false, ""},
		{"", false, ""},
	}
	for _, tt := range tests {
		e, ok := LookupEvent(tt.key)
		if ok != tt.wantOK || e.Label != tt.wantLabel {
			t.Errorf("LookupEvent(%q) = %q, %v; want %q, %v", tt.key, e.Label, ok, tt.wantLabel, tt.wantOK)
		}
		if ok && e.Key != tt.key {
			t.Errorf("LookupEvent(%q) answered under key %q", tt.key, e.Key)
		}
	}
}

func TestWebhookEventKeyRoundTrips(t *testing.T) {
	key := WebhookEventKey("whk_01hwz3k8q4m2v7c9d5e6f7g8h9")
	if key != "webhook.whk_01hwz3k8q4m2v7c9d5e6f7g8h9" {
		t.Errorf("WebhookEventKey = %q", key)
	}
	if id, ok := WebhookRegistrationID(key); !ok || id != "whk_01hwz3k8q4m2v7c9d5e6f7g8h9" {
		t.Errorf("WebhookRegistrationID(%q) = %q, %v", key, id, ok)
	}
	for _, notOne := range []string{WebhookReceived, "github.push", "webhook", "webhook."} {
		if id, ok := WebhookRegistrationID(notOne); ok {
			t.Errorf("WebhookRegistrationID(%q) = %q, want none", notOne, id)
		}
	}
}

func TestProvidersHandsOutCopies(t *testing.T) {
	p, ok := LookupProvider(ProviderGitHub)
	if !ok {
		t.Fatal("no github provider")
	}
	p.Events[0].Label = "changed"
	p.Scope.Label = "changed"
	p.Variables[0].Alias = "changed"
	again, _ := LookupProvider(ProviderGitHub)
	if again.Events[0].Label == "changed" || again.Scope.Label == "changed" || again.Variables[0].Alias == "changed" {
		t.Error("changing a returned provider changed the catalog")
	}
	if _, ok := LookupProvider("gitlab"); ok {
		t.Error("LookupProvider(gitlab) succeeded")
	}
	var names []string
	for _, p := range Providers() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"github", "webhook", "schedule"}) {
		t.Errorf("Providers = %v", names)
	}
}

func TestListActionsOffersTheBlockTypes(t *testing.T) {
	var wantIDs []string
	for _, b := range definition.Blocks() {
		wantIDs = append(wantIDs, b.Type)
	}
	for _, provider := range []string{"", "hangar"} {
		actions, ok := ListActions(provider)
		if !ok {
			t.Fatalf("ListActions(%q) not ok", provider)
		}
		var ids []string
		for _, a := range actions {
			ids = append(ids, a.ID)
			var schema map[string]any
			if err := json.Unmarshal([]byte(a.InputSchemaJSON), &schema); err != nil || schema["type"] != "object" {
				t.Errorf("%s: input schema %s is not an object schema (%v)", a.ID, a.InputSchemaJSON, err)
			}
			if a.Label == "" || a.Description == "" {
				t.Errorf("%s needs a label and a description", a.ID)
			}
		}
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("ListActions(%q) ids = %v, want %v", provider, ids, wantIDs)
		}
	}
	for _, provider := range []string{"github", "webhook", "schedule"} {
		if actions, ok := ListActions(provider); !ok || actions == nil || len(actions) != 0 {
			t.Errorf("ListActions(%q) = %#v, %v; want an empty list", provider, actions, ok)
		}
	}
	if _, ok := ListActions("gitlab"); ok {
		t.Error("ListActions(gitlab) succeeded")
	}
}

func TestStaticKeyOptionsAnswersCatalogNouns(t *testing.T) {
	events, ok := StaticKeyOptions(NounEventKey)
	if !ok || len(events) == 0 {
		t.Fatalf("event_key options = %v, %v", events, ok)
	}
	for _, o := range events {
		e, _ := LookupEvent(o.Key)
		if e.Hidden || !strings.HasPrefix(o.Key, "github.") {
			t.Errorf("event_key option %q should not be offered", o.Key)
		}
	}
	if events[0] != (KeyOption{Key: "github.pull_request.opened", Label: "GitHub: Pull request opened"}) {
		t.Errorf("first event_key option = %+v", events[0])
	}

	blocks, _ := StaticKeyOptions(NounBlockType)
	if len(blocks) != len(definition.Blocks()) || blocks[0] != (KeyOption{Key: "filter", Label: "Filter"}) {
		t.Errorf("block_type options = %v", blocks)
	}
	providers, _ := StaticKeyOptions(NounProvider)
	if want := []KeyOption{{"github", "GitHub"}, {"webhook", "Webhook"}, {"schedule", "Schedule"}}; !slices.Equal(providers, want) {
		t.Errorf("provider options = %v, want %v", providers, want)
	}
	for _, noun := range []string{"profile", "repo", ""} {
		if options, ok := StaticKeyOptions(noun); ok {
			t.Errorf("StaticKeyOptions(%q) = %v, want ok=false", noun, options)
		}
	}
}
