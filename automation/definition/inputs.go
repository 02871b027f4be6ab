package definition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Limits of settings.
const (
	MaxConcurrencyLimit = 100
	MaxDedupeWindow     = 7 * 24 * time.Hour
)

var inputTypes = []string{InputString, InputNumber, InputBoolean, InputObject, InputArray}

func validateInputDecls(decls []Input) []BlockError {
	var errs []BlockError
	if len(decls) > MaxInputs {
		errs = append(errs, BlockError{Field: "inputs", Code: CodeInvalid, Message: fmt.Sprintf("at most %d inputs", MaxInputs)})
	}
	seen := map[string]bool{}
	for i, in := range decls {
		at := func(field string) string { return FieldPath("inputs", i, field) }
		switch {
		case !idPattern.MatchString(in.Key):
			errs = append(errs, BlockError{Field: at("key"), Code: CodeInvalid, Message: "an input key is " + idShape})
		case seen[in.Key]:
			errs = append(errs, BlockError{Field: at("key"), Code: CodeDuplicate, Message: fmt.Sprintf("input key %q is used twice", in.Key)})
		}
		seen[in.Key] = true
		if !slices.Contains(inputTypes, in.Type) {
			errs = append(errs, BlockError{Field: at("type"), Code: CodeInvalid, Message: fmt.Sprintf("must be one of %v", inputTypes)})
			continue
		}
		if len(in.Default) > 0 {
			var v any
			if err := json.Unmarshal(in.Default, &v); err != nil || !matchesInputType(in.Type, v) {
				errs = append(errs, BlockError{Field: at("default"), Code: CodeType, Message: "must be a " + in.Type})
			}
		}
	}
	return errs
}

func matchesInputType(typ string, v any) bool {
	switch v.(type) {
	case string:
		return typ == InputString
	case float64:
		return typ == InputNumber
	case bool:
		return typ == InputBoolean
	case map[string]any:
		return typ == InputObject
	case []any:
		return typ == InputArray
	}
	return false
}

// ValidateInputs checks `inputs_json` against the declared inputs and returns the inputs with
// defaults filled in. Keys not declared are refused; a required input with no value and no
// default is reported. Numbers are float64, as encoding/json decodes them.
func ValidateInputs(decls []Input, inputsJSON []byte) (map[string]any, []BlockError) {
	given := map[string]any{}
	if len(bytes.TrimSpace(inputsJSON)) > 0 {
		if err := json.Unmarshal(inputsJSON, &given); err != nil {
			return nil, []BlockError{jsonError("inputs_json", err)}
		}
		if given == nil {
			given = map[string]any{} // "null"
		}
	}
	var errs []BlockError
	declared := map[string]Input{}
	for _, d := range decls {
		declared[d.Key] = d
	}
	for _, k := range sortedKeys(given) {
		if _, ok := declared[k]; !ok {
			errs = append(errs, BlockError{Field: FieldPath("inputs_json", k), Code: CodeUnknownField, Message: fmt.Sprintf("no input %q is declared", k)})
		}
	}
	resolved := make(map[string]any, len(decls))
	for _, d := range decls {
		field := FieldPath("inputs_json", d.Key)
		v, ok := given[d.Key]
		if !ok || v == nil {
			switch {
			case len(d.Default) > 0:
				if err := json.Unmarshal(d.Default, &v); err != nil {
					errs = append(errs, BlockError{Field: field, Code: CodeType, Message: "the declared default is not JSON"})
					continue
				}
			case d.Required:
				errs = append(errs, BlockError{Field: field, Code: CodeRequired, Message: "is required"})
				continue
			default:
				continue
			}
		}
		if !matchesInputType(d.Type, v) {
			errs = append(errs, BlockError{Field: field, Code: CodeType, Message: "must be a " + d.Type})
			continue
		}
		resolved[d.Key] = v
	}
	return resolved, errs
}

// ParseSettings reads and checks `settings_json`; empty means all defaults.
func ParseSettings(settingsJSON []byte) (Settings, []BlockError) {
	var s Settings
	if len(bytes.TrimSpace(settingsJSON)) == 0 {
		return s, nil
	}
	if err := strictDecode(settingsJSON, &s); err != nil {
		e := jsonError("settings_json", err)
		return s, []BlockError{e}
	}
	var errs []BlockError
	if s.ConcurrencyLimit < 0 || s.ConcurrencyLimit > MaxConcurrencyLimit {
		errs = append(errs, BlockError{Field: "concurrency_limit", Code: CodeInvalid, Message: fmt.Sprintf("must be between 0 (the default) and %d", MaxConcurrencyLimit)})
	}
	if s.DedupeWindow != "" {
		if msg := checkDuration(s.DedupeWindow, MaxDedupeWindow); msg != "" {
			errs = append(errs, BlockError{Field: "dedupe_window", Code: CodeInvalid, Message: msg})
		}
	}
	if s.TimeZone != "" {
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			errs = append(errs, BlockError{Field: "time_zone", Code: CodeInvalid, Message: "must be an IANA time zone such as Europe/Paris"})
		}
	}
	if s.Retry != nil {
		errs = append(errs, blockErrors("", checkRetry(s.Retry, "retry"))...)
	}
	return s, errs
}

// ApplyOverrides patches block fields from `block_overrides_json`, an object of block id to an
// object of field to value; a null value removes the field (its default applies again). Unknown
// blocks and fields are refused, and the patched definition is validated again. The definition
// passed in is not changed.
func (v Validator) ApplyOverrides(def Definition, overridesJSON []byte) (Definition, []BlockError) {
	if len(bytes.TrimSpace(overridesJSON)) == 0 {
		return def, v.Validate(def)
	}
	var overrides map[string]map[string]any
	if err := json.Unmarshal(overridesJSON, &overrides); err != nil {
		return def, []BlockError{jsonError("overrides_json", err)}
	}
	out := def
	out.Blocks = make([]Block, len(def.Blocks))
	byID := map[string]int{}
	for i, b := range def.Blocks {
		b.Fields = maps.Clone(b.Fields)
		if b.Fields == nil {
			b.Fields = map[string]any{}
		}
		out.Blocks[i] = b
		byID[b.ID] = i
	}
	var errs []BlockError
	for _, id := range sortedKeys(overrides) {
		i, ok := byID[id]
		if !ok {
			errs = append(errs, BlockError{BlockID: id, Field: FieldPath("overrides_json", id), Code: CodeReference, Message: fmt.Sprintf("no block %q", id)})
			continue
		}
		b := &out.Blocks[i]
		spec, known := LookupBlock(b.Type)
		for _, field := range sortedKeys(overrides[id]) {
			if _, ok := spec.Field(field); !known || !ok {
				errs = append(errs, BlockError{BlockID: id, Field: field, Code: CodeUnknownField, Message: fmt.Sprintf("%s blocks have no field %q", b.Type, field)})
				continue
			}
			if val := overrides[id][field]; val == nil {
				delete(b.Fields, field)
			} else {
				b.Fields[field] = val
			}
		}
	}
	if len(errs) > 0 {
		return def, errs
	}
	return out, v.Validate(out)
}
