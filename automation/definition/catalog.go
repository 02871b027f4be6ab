package definition

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ActionSchema is one block type as the action catalog shows it (ActionCatalogEntry).
type ActionSchema struct {
	ID          string
	Label       string
	Description string
	// InputSchema is a JSON Schema (2020-12) of the block's fields. Each property carries
	// "x-kind" (a FieldKind) so an editor knows which strings are templates, CEL or JavaScript.
	InputSchema json.RawMessage
}

// templateSchema matches a string holding a template, the alternative a field with a fixed form
// allows.
var templateSchema = map[string]any{"type": "string", "pattern": `\{\{`}

// ActionSchemas lists the block types with the JSON Schema of their fields.
func ActionSchemas() []ActionSchema {
	out := make([]ActionSchema, len(blockSpecs))
	for i, spec := range blockSpecs {
		schema, err := json.Marshal(blockSchema(spec))
		if err != nil {
			panic(fmt.Sprintf("marshal schema of %s blocks: %v", spec.Type, err)) // static data
		}
		out[i] = ActionSchema{ID: spec.Type, Label: spec.Label, Description: spec.Description, InputSchema: schema}
	}
	return out
}

func blockSchema(spec BlockSpec) map[string]any {
	props := map[string]any{}
	var required []string
	for _, f := range spec.Fields {
		props[f.Name] = fieldSchema(f)
		if f.Required {
			required = append(required, f.Name)
		}
	}
	schema := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"title":                spec.Label,
		"description":          spec.Description,
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		schema["required"] = required
	}
	if len(spec.OneOf) > 0 {
		var alts []any
		for _, name := range spec.OneOf {
			alts = append(alts, map[string]any{"required": []string{name}})
		}
		schema["oneOf"] = alts
	}
	return schema
}

func fieldSchema(f FieldSpec) map[string]any {
	var s map[string]any
	fixedForm := true // a fixed form may instead be one template
	switch f.Kind {
	case KindText:
		s, fixedForm = map[string]any{"type": "string"}, false
	case KindURL:
		s = map[string]any{"type": "string", "format": "uri", "pattern": "^https?://"}
	case KindEnum:
		s = map[string]any{"type": "string", "enum": f.Enum}
	case KindDuration:
		s = map[string]any{"type": "string", "pattern": `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`}
	case KindTime:
		s = map[string]any{"type": "string", "format": "date-time"}
	case KindBool:
		s = map[string]any{"type": "boolean"}
	case KindTextMap:
		s, fixedForm = map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}, false
	case KindJSON:
		s, fixedForm = map[string]any{}, false
	case KindStatusList:
		s, fixedForm = map[string]any{"type": "array", "minItems": 1,
			"items": map[string]any{"type": "integer", "minimum": 100, "maximum": 599}}, false
	case KindSecretMap:
		s, fixedForm = map[string]any{"type": "object",
			"additionalProperties": map[string]any{"type": "string", "pattern": secretNamePattern.String()}}, false
	case KindCondition, KindScript:
		s, fixedForm = map[string]any{"type": "string", "minLength": 1}, false
	}
	if fixedForm {
		s = map[string]any{"anyOf": []any{s, templateSchema}}
	}
	s["description"] = f.Description
	s["x-kind"] = string(f.Kind)
	if f.Default != nil {
		s["default"] = f.Default
	}
	return s
}

// BlockReference is the Markdown reference of the block types, for drafts and docs/automations.md.
func BlockReference() string {
	var b strings.Builder
	for _, spec := range blockSpecs {
		fmt.Fprintf(&b, "#### `%s` — %s\n\n%s\n\n", spec.Type, spec.Label, spec.Description)
		b.WriteString("| field | kind | required | default | meaning |\n|---|---|---|---|---|\n")
		for _, f := range spec.Fields {
			kind := string(f.Kind)
			if len(f.Enum) > 0 {
				kind += ": " + strings.Join(f.Enum, ", ")
			}
			req, def := "", ""
			if f.Required {
				req = "yes"
			}
			if f.Default != nil {
				def = fmt.Sprintf("`%v`", f.Default)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, kind, req, def, f.Description)
		}
		if len(spec.OneOf) > 0 {
			fmt.Fprintf(&b, "\nExactly one of `%s`.\n", strings.Join(spec.OneOf, "`, `"))
		}
		b.WriteString("\n")
	}
	return b.String()
}
