package definition_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/automation/definition"
)

func TestValidateInputs(t *testing.T) {
	def, errs := validator.Load(prReviewJSON(t))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tests := []struct {
		name   string
		inputs string
		want   map[string]any
		errs   []want
	}{
		{"defaults fill what is not given", `{"profile_id": "prof_1"}`,
			map[string]any{"profile_id": "prof_1", "review_label": "review-me", "max_files": 20.0}, nil},
		{"given values win over defaults, null means the default", `{"profile_id": "prof_1", "review_label": "ai", "max_files": null}`,
			map[string]any{"profile_id": "prof_1", "review_label": "ai", "max_files": 20.0}, nil},
		{"required without a value", ``, map[string]any{"review_label": "review-me", "max_files": 20.0},
			[]want{{"", "inputs_json.profile_id", definition.CodeRequired, "required"}}},
		{"wrong types and unknown keys", `{"profile_id": 7, "max_files": "20", "colour": "red"}`,
			map[string]any{"review_label": "review-me"},
			[]want{
				{"", "inputs_json.colour", definition.CodeUnknownField, "colour"},
				{"", "inputs_json.profile_id", definition.CodeType, "must be a string"},
				{"", "inputs_json.max_files", definition.CodeType, "must be a number"},
			}},
		{"not an object", `[1]`, nil, []want{{"", "inputs_json", definition.CodeType, "object"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := definition.ValidateInputs(def.Inputs, []byte(tt.inputs))
			assertErrors(t, errs, tt.errs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("resolved = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		want     definition.Settings
		errs     []want
	}{
		{"empty is all defaults", "", definition.Settings{}, nil},
		{"every setting", `{"concurrency_limit": 4, "dedupe_window": "1h", "time_zone": "America/New_York", "retry": {"max_attempts": 3, "backoff": "2s"}}`,
			definition.Settings{ConcurrencyLimit: 4, DedupeWindow: "1h", TimeZone: "America/New_York", Retry: &definition.Retry{MaxAttempts: 3, Backoff: "2s"}}, nil},
		{"out of range", `{"concurrency_limit": 1000, "dedupe_window": "30d", "time_zone": "Nowhere", "retry": {"max_attempts": -1}}`,
			definition.Settings{ConcurrencyLimit: 1000, DedupeWindow: "30d", TimeZone: "Nowhere", Retry: &definition.Retry{MaxAttempts: -1}},
			[]want{
				{"", "concurrency_limit", definition.CodeInvalid, "between 0"},
				{"", "dedupe_window", definition.CodeInvalid, "duration"},
				{"", "time_zone", definition.CodeInvalid, "IANA"},
				{"", "retry.max_attempts", definition.CodeInvalid, "between 1 and 10"},
			}},
		{"unknown key", `{"parallelism": 2}`, definition.Settings{}, []want{{"", "settings_json", definition.CodeUnknownField, "parallelism"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := definition.ParseSettings([]byte(tt.settings))
			assertErrors(t, errs, tt.errs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("settings = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestApplyOverrides(t *testing.T) {
	def, errs := validator.Load(prReviewJSON(t))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tests := []struct {
		name      string
		overrides string
		check     func(t *testing.T, got definition.Definition)
		errs      []want
	}{
		{"patches and removes fields", `{"ack": {"timeout": "20s", "expect_status": null}, "settle": {"duration": "1m"}}`,
			func(t *testing.T, got definition.Definition) {
				ack, settle := got.Blocks[2].Fields, got.Blocks[5].Fields
				if ack["timeout"] != "20s" || ack["expect_status"] != nil || settle["duration"] != "1m" {
					t.Errorf("patched blocks = %v / %v", ack, settle)
				}
				if def.Blocks[2].Fields["timeout"] != "10s" {
					t.Error("ApplyOverrides changed the definition it was given")
				}
			}, nil},
		{"unknown block and unknown field", `{"ack": {"verb": "GET"}, "nope": {"x": 1}}`, nil, []want{
			{"ack", "verb", definition.CodeUnknownField, "verb"},
			{"nope", "overrides_json.nope", definition.CodeReference, "nope"},
		}},
		{"the result is validated again", `{"settle": {"duration": "36h"}, "ack": {"url": "{{ event.number + }}"}}`, nil, []want{
			{"ack", "url", definition.CodeTemplate, "Syntax error"},
			{"settle", "duration", definition.CodeInvalid, "at most 24h"},
		}},
		{"not JSON", `{"ack": `, nil, []want{{"", "overrides_json", definition.CodeJSON, "offset"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := validator.ApplyOverrides(def, []byte(tt.overrides))
			assertErrors(t, errs, tt.errs)
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestActionSchemasCoverEveryBlockType(t *testing.T) {
	schemas := definition.ActionSchemas()
	if len(schemas) != len(definition.Blocks()) {
		t.Fatalf("%d schemas for %d block types", len(schemas), len(definition.Blocks()))
	}
	for _, s := range schemas {
		var schema struct {
			Type       string                     `json:"type"`
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
			Additional *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
		spec, _ := definition.LookupBlock(s.ID)
		if schema.Type != "object" || schema.Additional == nil || *schema.Additional || len(schema.Properties) != len(spec.Fields) {
			t.Errorf("%s schema = %s", s.ID, s.InputSchema)
		}
		for _, f := range spec.Fields {
			if f.Required && !strings.Contains(string(s.InputSchema), `"required":[`) {
				t.Errorf("%s schema lacks required field %s", s.ID, f.Name)
			}
		}
	}
	http, _ := json.Marshal(schemas[2])
	for _, want := range []string{`"enum":["GET","POST","PUT","PATCH","DELETE"]`, `"default":"GET"`, `"x-kind":"secret_map"`} {
		if !strings.Contains(string(http), want) {
			t.Errorf("http schema lacks %s: %s", want, http)
		}
	}
	ref := definition.BlockReference()
	for _, spec := range definition.Blocks() {
		if !strings.Contains(ref, "#### `"+spec.Type+"`") {
			t.Errorf("BlockReference lacks %s", spec.Type)
		}
	}
}
