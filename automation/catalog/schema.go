package catalog

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// obj is a JSON object under construction: a schema or a sample payload.
type obj = map[string]any

// Schema builders. The schemas are JSON Schema 2020-12, describing the fields automations read
// (filters, templates, instance keys), not every field a provider sends.

func eventSchema(title string, props obj, required ...string) obj {
	s := object(props, required...)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["title"] = title
	return s
}

func object(props obj, required ...string) obj {
	s := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func typed(kind, description string) obj {
	s := obj{"type": kind}
	if description != "" {
		s["description"] = description
	}
	return s
}

func str(description string) obj     { return typed("string", description) }
func integer(description string) obj { return typed("integer", description) }
func boolean(description string) obj { return typed("boolean", description) }

// orNull lets a field also be null, as GitHub sends for unset optional values.
func orNull(s obj) obj {
	out := maps.Clone(s)
	out["type"] = []string{s["type"].(string), "null"}
	if values, ok := s["enum"].([]any); ok {
		out["enum"] = append(slices.Clone(values), nil)
	}
	return out
}

func constant(value, description string) obj {
	s := str(description)
	s["const"] = value
	return s
}

func enum(description string, values ...string) obj {
	s := str(description)
	anyValues := make([]any, len(values))
	for i, v := range values {
		anyValues[i] = v
	}
	s["enum"] = anyValues
	return s
}

func arrayOf(items obj, description string) obj {
	s := typed("array", description)
	s["items"] = items
	return s
}

// with returns a copy of o with more keys (later ones win): shared fragments stay untouched.
func with(o obj, more obj) obj {
	out := maps.Clone(o)
	maps.Copy(out, more)
	return out
}

// mustJSON renders catalog data compactly (clients indent it for display). The data is fixed at
// build time and tests render every entry, so a failure here is a programming error.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("catalog: render %T: %v", v, err))
	}
	return string(b)
}
