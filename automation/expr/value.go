package expr

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// Unknown is the value of an expression that reads a step output not known yet. It marshals as
// {"_unknown": true, "expr": "..."}.
type Unknown struct {
	Expr string
}

// MarshalJSON writes the placeholder that TestRender shows.
func (u Unknown) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Unknown bool   `json:"_unknown"`
		Expr    string `json:"expr"`
	}{true, u.Expr})
}

// IsUnknown lets packages that do not import this one tell a placeholder from a real value.
func (Unknown) IsUnknown() bool { return true }

// String is how an Unknown reads inside interpolated text.
func (u Unknown) String() string { return "<unknown: " + u.Expr + ">" }

// jsonAdapter hands Go values to CEL the way JSON means them: whole numbers are ints. It wraps
// maps and lists itself so that their elements come back through it too.
type jsonAdapter struct{ types.Adapter }

// maxExactInt is the largest magnitude below which every whole float64 is exact.
const maxExactInt = 1 << 53

func (a jsonAdapter) NativeToValue(v any) ref.Val {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) <= maxExactInt {
			return types.Int(int64(v))
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return types.Int(i)
		}
		if f, err := v.Float64(); err == nil {
			return types.Double(f)
		}
	case map[string]any:
		return types.NewStringInterfaceMap(a, v)
	case []any:
		return types.NewDynamicList(a, v)
	}
	return a.Adapter.NativeToValue(v)
}

// toGo converts a CEL value into plain JSON-able Go.
func toGo(v ref.Val, src string) (any, error) {
	switch v := v.(type) {
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
		return float64(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v has no JSON form", f)
		}
		return f, nil
	case types.String:
		return string(v), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(v), nil
	case types.Null:
		return nil, nil
	case types.Timestamp:
		return v.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return v.Duration.String(), nil
	case *types.Unknown:
		return Unknown{Expr: src}, nil
	case *types.Err:
		return nil, v
	case *types.Optional:
		if !v.HasValue() {
			return nil, nil
		}
		return toGo(v.GetValue(), src)
	case ref.Type:
		return v.TypeName(), nil
	}
	// Values that came in from Vars unchanged are already plain Go.
	switch native := v.Value().(type) {
	case map[string]any, []any:
		return native, nil
	}
	switch v := v.(type) {
	case traits.Mapper:
		out := make(map[string]any)
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			key, ok := k.(types.String)
			if !ok {
				key = types.String(fmt.Sprint(k.Value()))
			}
			e, err := toGo(v.Get(k), src)
			if err != nil {
				return nil, err
			}
			out[string(key)] = e
		}
		return out, nil
	case traits.Lister:
		n := int(v.Size().(types.Int))
		out := make([]any, n)
		for i := range n {
			e, err := toGo(v.Get(types.Int(i)), src)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s has no JSON form", v.Type().TypeName())
}

// textOf is a value's form inside interpolated text: strings as they are, null as nothing,
// objects and arrays as compact JSON.
func textOf(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case nil:
		return "", nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case Unknown:
		return v.String(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("format %T as JSON: %w", v, err)
	}
	return string(b), nil
}
