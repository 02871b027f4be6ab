package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// topLevelKeys are the keys a definition may have.
var topLevelKeys = map[string]bool{"version": true, "entrypoints": true, "inputs": true, "instance": true, "blocks": true}

// Parse reads `definition_json`. Syntax errors, unknown keys and values of the wrong JSON type
// are reported; what the values mean is Validate's job. The Definition returned holds whatever
// could be read, even when there are errors.
func Parse(definitionJSON []byte) (Definition, []BlockError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(definitionJSON, &top); err != nil {
		return Definition{}, []BlockError{jsonError("definition_json", err)}
	}
	if top == nil {
		return Definition{}, []BlockError{{Field: "definition_json", Code: CodeJSON, Message: "must be a JSON object"}}
	}
	var def Definition
	var errs []BlockError
	for _, k := range sortedKeys(top) {
		if !topLevelKeys[k] {
			errs = append(errs, BlockError{Field: FieldPath(k), Code: CodeUnknownField, Message: fmt.Sprintf("a definition has no key %q", k)})
		}
	}
	if raw, ok := top["version"]; ok {
		if err := json.Unmarshal(raw, &def.Version); err != nil {
			errs = append(errs, BlockError{Field: "version", Code: CodeType, Message: "must be a whole number"})
		}
	}
	def.Entrypoints, errs = parseList[Entrypoint](top, "entrypoints", strictDecode, errs)
	def.Inputs, errs = parseList[Input](top, "inputs", strictDecode, errs)
	if raw, ok := top["instance"]; ok && string(raw) != "null" {
		def.Instance = new(InstanceSpec)
		if err := strictDecode(raw, def.Instance); err != nil {
			errs = append(errs, jsonError("instance", err))
		}
	}
	def.Blocks, errs = parseList[Block](top, "blocks", decodeBlock, errs)
	return def, errs
}

// parseList decodes a list element by element, so an error names the element.
func parseList[T any](top map[string]json.RawMessage, key string, decode func([]byte, any) error, errs []BlockError) ([]T, []BlockError) {
	raw, ok := top[key]
	if !ok || string(raw) == "null" {
		return nil, errs
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, append(errs, BlockError{Field: key, Code: CodeType, Message: "must be a list"})
	}
	out := make([]T, 0, len(items))
	for i, item := range items {
		var v T
		if err := decode(item, &v); err != nil {
			e := jsonError(FieldPath(key, i), err)
			if _, isBlock := any(v).(Block); isBlock {
				var named struct{ ID string }
				_ = json.Unmarshal(item, &named) // best effort: the error is reported either way
				e.BlockID = named.ID
			}
			errs = append(errs, e)
			continue
		}
		out = append(out, v)
	}
	return out, errs
}

// strictDecode decodes one object, refusing keys its type does not have.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeBlock decodes a block; its type's fields are checked later, but its retry policy is
// read strictly here since Block's own decoding is lenient about it.
func decodeBlock(data []byte, v any) error {
	b := v.(*Block)
	if err := json.Unmarshal(data, b); err != nil {
		return err
	}
	var common struct {
		Retry json.RawMessage `json:"retry"`
	}
	if err := json.Unmarshal(data, &common); err != nil {
		return err
	}
	if len(common.Retry) > 0 && string(common.Retry) != "null" {
		if err := strictDecode(common.Retry, new(Retry)); err != nil {
			return fmt.Errorf("retry: %w", err)
		}
	}
	return nil
}

// jsonError turns a decoding error into a BlockError at field, with the offset of a syntax error.
func jsonError(field string, err error) BlockError {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	msg := strings.TrimPrefix(err.Error(), "json: ")
	switch {
	case errors.As(err, &syntax):
		msg = fmt.Sprintf("invalid JSON at offset %d: %s", syntax.Offset, msg)
	case errors.As(err, &typ):
		where := field
		if typ.Field != "" {
			where = field + "." + typ.Field
		}
		return BlockError{Field: where, Code: CodeType, Message: fmt.Sprintf("must be a JSON %s, not %s", jsonTypeName(typ.Type.Kind().String()), typ.Value)}
	case strings.Contains(msg, "unknown field"):
		return BlockError{Field: field, Code: CodeUnknownField, Message: msg}
	}
	return BlockError{Field: field, Code: CodeJSON, Message: msg}
}

func jsonTypeName(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int", "int32", "int64", "float64":
		return "number"
	case "bool":
		return "boolean"
	case "slice":
		return "list"
	}
	return "object"
}
