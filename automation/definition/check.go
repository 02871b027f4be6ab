package definition

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Codes of BlockError.
const (
	CodeJSON         = "json"          // not valid JSON, or not the JSON shape expected
	CodeUnknownField = "unknown_field" // a key the schema does not have
	CodeRequired     = "required"      // a required value is missing
	CodeType         = "type"          // a value of the wrong JSON type
	CodeInvalid      = "invalid"       // a value of the right type but not allowed (enum, shape, range)
	CodeDuplicate    = "duplicate"     // an id or key used twice
	CodeReference    = "reference"     // a reference to a block that does not exist
	CodeCycle        = "cycle"         // blocks that need each other
	CodeTemplate     = "template"      // a {{ expr }} that does not compile
	CodeCEL          = "cel"           // a CEL expression that does not compile
	CodeScript       = "script"        // JavaScript that does not parse
	CodeEval         = "eval"          // an expression that failed while rendering or running
)

// idShape is the shape of ids, input keys and handle names, for messages.
const idShape = "a lowercase letter then up to 62 lowercase letters, digits or underscores"

var (
	idPattern         = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	secretNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)
)

// fieldProblem is a BlockError before the block it belongs to is known.
type fieldProblem struct {
	path []any
	code string
	msg  string
}

// ExprChecker compiles the expression language without evaluating it; *expr.Env is one. Each
// error's text leads with "line:column:".
type ExprChecker interface {
	CheckExpr(src string) error
	CheckCondition(src string) error
	CheckTemplate(s string) error
}

// ScriptChecker parses a code block's JavaScript and says where it is wrong.
type ScriptChecker func(source string) (line int, msg string, ok bool)

// CronChecker parses a cron expression: five fields or a macro such as @daily.
type CronChecker func(spec string) error

func hasTemplate(s string, rendered bool) bool { return !rendered && strings.Contains(s, "{{") }

// fieldChecker checks field values; exprs and script are nil when those checks are skipped, and
// rendered is set when the values are the output of rendering rather than templates.
type fieldChecker struct {
	exprs    ExprChecker
	script   ScriptChecker
	rendered bool
	out      []fieldProblem
}

func (c *fieldChecker) add(path []any, code, format string, args ...any) {
	c.out = append(c.out, fieldProblem{path: slices.Clone(path), code: code, msg: fmt.Sprintf(format, args...)})
}

// template checks one string of a rendered field.
func (c *fieldChecker) template(path []any, s string) {
	if c.exprs == nil || !hasTemplate(s, c.rendered) {
		return
	}
	if err := c.exprs.CheckTemplate(s); err != nil {
		c.add(path, CodeTemplate, "%v", err)
	}
}

// formatted checks a string field that has a fixed form, unless it is a template still.
func (c *fieldChecker) formatted(path []any, v any, check func(string) string) {
	s, ok := v.(string)
	if !ok {
		c.add(path, CodeType, "must be a string")
		return
	}
	if hasTemplate(s, c.rendered) {
		c.template(path, s)
		return
	}
	if msg := check(s); msg != "" {
		c.add(path, CodeInvalid, "%s", msg)
	}
}

// isUnknown reports a rendered value that stands for an output not known yet (expr.Unknown); its
// form cannot be checked.
func isUnknown(v any) bool {
	u, ok := v.(interface{ IsUnknown() bool })
	return ok && u.IsUnknown()
}

func (c *fieldChecker) field(f FieldSpec, v any) {
	if c.rendered && isUnknown(v) {
		return
	}
	path := []any{f.Name}
	switch f.Kind {
	case KindText:
		c.text(path, v)
	case KindURL:
		c.formatted(path, v, checkURL)
	case KindEnum:
		c.formatted(path, v, func(s string) string {
			if !slices.Contains(f.Enum, s) {
				return fmt.Sprintf("must be one of %s", strings.Join(f.Enum, ", "))
			}
			return ""
		})
	case KindDuration:
		c.formatted(path, v, func(s string) string { return checkDuration(s, f.Max) })
	case KindTime:
		c.formatted(path, v, func(s string) string {
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				return "must be an RFC 3339 time such as 2026-01-02T15:04:05Z"
			}
			return ""
		})
	case KindBool:
		if s, ok := v.(string); ok && hasTemplate(s, c.rendered) {
			c.template(path, s)
		} else if _, ok := v.(bool); !ok {
			c.add(path, CodeType, "must be true or false")
		}
	case KindTextMap:
		m, ok := v.(map[string]any)
		if !ok {
			c.add(path, CodeType, "must be an object of strings")
			return
		}
		for _, k := range sortedKeys(m) {
			c.text(append(path, k), m[k])
		}
	case KindJSON:
		c.json(path, v)
	case KindStatusList:
		c.statusList(path, v)
	case KindSecretMap:
		m, ok := v.(map[string]any)
		if !ok {
			c.add(path, CodeType, "must be an object of header name to secret name")
			return
		}
		for _, k := range sortedKeys(m) {
			if name, ok := m[k].(string); !ok || !secretNamePattern.MatchString(name) {
				c.add(append(path, k), CodeInvalid, "must name an org secret (letters, digits, _ . -); secrets are referenced, never templated")
			}
		}
	case KindCondition:
		s, ok := v.(string)
		if !ok {
			c.add(path, CodeType, "must be a CEL expression string")
		} else if c.exprs != nil {
			if err := c.exprs.CheckCondition(s); err != nil {
				c.add(path, CodeCEL, "%v", err)
			}
		}
	case KindScript:
		s, ok := v.(string)
		if !ok {
			c.add(path, CodeType, "must be a JavaScript string")
		} else if c.script != nil {
			if line, msg, ok := c.script(s); !ok {
				c.add(path, CodeScript, "line %d: %s", line, msg)
			}
		}
	}
}

// text checks a text value: a string (template) as written; once rendered, any scalar.
func (c *fieldChecker) text(path []any, v any) {
	if c.rendered && isUnknown(v) {
		return
	}
	switch v := v.(type) {
	case string:
		c.template(path, v)
	case nil, bool, float64, int64, int:
		if !c.rendered {
			c.add(path, CodeType, "must be a string")
		}
	default:
		c.add(path, CodeType, "must be a string, not an object or a list")
	}
}

func (c *fieldChecker) json(path []any, v any) {
	switch v := v.(type) {
	case string:
		c.template(path, v)
	case map[string]any:
		for _, k := range sortedKeys(v) {
			c.json(append(path, k), v[k])
		}
	case []any:
		for i, e := range v {
			c.json(append(path, i), e)
		}
	}
}

func (c *fieldChecker) statusList(path []any, v any) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		c.add(path, CodeType, "must be a non-empty list of HTTP status codes")
		return
	}
	for i, e := range list {
		if n, ok := wholeNumber(e); !ok || n < 100 || n > 599 {
			c.add(append(path, i), CodeInvalid, "must be an HTTP status code (100-599)")
		}
	}
}

// wholeNumber reads a JSON number that has no fraction.
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n == math.Trunc(n) && math.Abs(n) <= 1<<53 {
			return int64(n), true
		}
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

func checkURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "must be an absolute http or https URL"
	}
	return ""
}

func checkDuration(s string, limit time.Duration) string {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return "must be a duration such as 30s, 5m or 1h30m"
	case d <= 0:
		return "must be positive"
	case limit > 0 && d > limit:
		return "must be at most " + formatDuration(limit)
	}
	return ""
}

// formatDuration writes whole hours and minutes the short way ("24h", not "24h0m0s").
func formatDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" {
		return "0s"
	}
	return s
}

// checkBlockFields checks a block's fields against its type: unknown fields, required ones,
// each field's kind, then the type's rule.
func checkBlockFields(spec BlockSpec, fields map[string]any, c *fieldChecker) []fieldProblem {
	for _, k := range sortedKeys(fields) {
		if _, ok := spec.Field(k); !ok {
			c.add([]any{k}, CodeUnknownField, "%s blocks have no field %q", spec.Type, k)
		}
	}
	for _, f := range spec.Fields {
		v, ok := fields[f.Name]
		switch {
		case !ok && f.Required:
			c.add([]any{f.Name}, CodeRequired, "is required")
		case ok:
			c.field(f, v)
		}
	}
	if len(spec.OneOf) > 0 {
		given := 0
		for _, name := range spec.OneOf {
			if _, ok := fields[name]; ok {
				given++
			}
		}
		if given != 1 {
			c.add([]any{spec.OneOf[0]}, CodeRequired, "set exactly one of %s", strings.Join(spec.OneOf, ", "))
		}
	}
	if spec.rule != nil {
		c.out = append(c.out, spec.rule(fields, c.rendered)...)
	}
	return c.out
}

// CheckRendered checks a block's rendered fields against its type: a field that was a template
// must now have the field's form (a duration that renders to "soon" is reported here).
func CheckRendered(blockID, typ string, fields map[string]any) []BlockError {
	spec, ok := LookupBlock(typ)
	if !ok {
		return []BlockError{{BlockID: blockID, Field: "type", Code: CodeInvalid, Message: "unknown block type " + typ}}
	}
	return blockErrors(blockID, checkBlockFields(spec, fields, &fieldChecker{rendered: true}))
}

func blockErrors(blockID string, problems []fieldProblem) []BlockError {
	out := make([]BlockError, len(problems))
	for i, p := range problems {
		out[i] = BlockError{BlockID: blockID, Field: FieldPath(p.path...), Code: p.code, Message: p.msg}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// FieldPath writes a path of map keys (string) and list indices (int) the way BlockError.Field
// names it: headers.Authorization, body.items[2].name, headers["x.y"].
func FieldPath(segs ...any) string {
	var b strings.Builder
	for _, seg := range segs {
		switch seg := seg.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", seg)
		case string:
			if seg == "" || strings.ContainsAny(seg, ".[]\" \t\n") {
				fmt.Fprintf(&b, "[%q]", seg)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(seg)
		default:
			fmt.Fprintf(&b, "[%v]", seg)
		}
	}
	return b.String()
}
