package expr

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Template is a string with `{{ expr }}` parts. A template that is exactly one part (surrounding
// space aside) renders to the expression's typed value; any other renders to text with each
// part replaced by its value's text form.
//
// The scanner that finds a part's closing `}}` skips CEL string literals (quoted, triple-quoted,
// raw) and balanced braces, so `{{ {'a': {'b': 1}} }}` and `{{ "}}" }}` are single parts. There
// is no escape for a literal `{{`; write `{{ "{{" }}`.
type Template struct {
	parts  []templatePart
	single bool
}

type templatePart struct {
	text string   // literal text, when prg is nil
	prg  *Program // an expression
}

// ParseTemplate scans s and compiles each expression in it, or returns the cached template. A
// failure is an *Error whose position is inside s.
func (e *Env) ParseTemplate(s string) (*Template, error) {
	return e.templates.get(s, func() (*Template, error) { return e.parseTemplate(s) })
}

// CheckTemplate reports whether every expression of s compiles, as an *Error positioned in s.
func (e *Env) CheckTemplate(s string) error {
	if !strings.Contains(s, "{{") {
		return nil
	}
	_, err := e.ParseTemplate(s)
	return err
}

// Render renders one template string; see Template.
func (e *Env) Render(s string, vars Vars) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	t, err := e.ParseTemplate(s)
	if err != nil {
		return nil, err
	}
	return t.Render(vars)
}

// Render evaluates the template's expressions.
func (t *Template) Render(vars Vars) (any, error) {
	if t.single {
		return t.parts[0].prg.Eval(vars)
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.prg == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := p.prg.Eval(vars)
		if err != nil {
			return nil, err
		}
		text, err := textOf(v)
		if err != nil {
			return nil, &EvalError{Expr: p.prg.name, Err: err}
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// Programs are the template's compiled expressions in order.
func (t *Template) Programs() []*Program {
	var out []*Program
	for _, p := range t.parts {
		if p.prg != nil {
			out = append(out, p.prg)
		}
	}
	return out
}

func (e *Env) parseTemplate(s string) (*Template, error) {
	t := &Template{}
	for i := 0; i < len(s); {
		open := strings.Index(s[i:], "{{")
		if open < 0 {
			t.parts = append(t.parts, templatePart{text: s[i:]})
			break
		}
		open += i
		if open > i {
			t.parts = append(t.parts, templatePart{text: s[i:open]})
		}
		start := open + 2
		end := closingBraces(s, start)
		if end < 0 {
			line, col := position(s, open)
			return nil, &Error{Line: line, Column: col, Message: "unclosed {{"}
		}
		src := s[start:end]
		if strings.TrimSpace(src) == "" {
			line, col := position(s, open)
			return nil, &Error{Line: line, Column: col, Message: "empty {{ }}"}
		}
		prg, err := e.Compile(src)
		if err != nil {
			return nil, shiftError(err, s, start)
		}
		t.parts = append(t.parts, templatePart{prg: prg})
		i = end + 2
	}
	t.single = isSingle(t.parts)
	if t.single {
		t.parts = slices.DeleteFunc(t.parts, func(p templatePart) bool { return p.prg == nil })
	}
	return t, nil
}

// isSingle reports whether the parts are one expression with nothing but space around it.
func isSingle(parts []templatePart) bool {
	exprs := 0
	for _, p := range parts {
		switch {
		case p.prg != nil:
			exprs++
		case strings.TrimSpace(p.text) != "":
			return false
		}
	}
	return exprs == 1
}

// closingBraces finds the `}}` that ends the expression starting at start, or -1.
func closingBraces(s string, start int) int {
	depth := 0
	for k := start; k < len(s); {
		switch c := s[k]; c {
		case '\'', '"':
			next := skipStringLiteral(s, k, isRawPrefix(s, start, k))
			if next < 0 {
				return -1
			}
			k = next
			continue
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			} else if k+1 < len(s) && s[k+1] == '}' {
				return k
			}
		}
		k++
	}
	return -1
}

// isRawPrefix reports whether the quote at k opens a raw string (r'…', rb'…', br'…').
func isRawPrefix(s string, start, k int) bool {
	isR := func(i int) bool { return i >= start && (s[i] == 'r' || s[i] == 'R') }
	isB := func(i int) bool { return i >= start && (s[i] == 'b' || s[i] == 'B') }
	return isR(k-1) || (isB(k-1) && isR(k-2))
}

// skipStringLiteral returns the index just past the string literal opening at k, or -1 when it
// does not close.
func skipStringLiteral(s string, k int, raw bool) int {
	q := s[k]
	delim := string(q)
	if strings.HasPrefix(s[k:], strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	for i := k + len(delim); i < len(s); i++ {
		switch {
		case !raw && s[i] == '\\':
			i++
		case strings.HasPrefix(s[i:], delim):
			return i + len(delim)
		case s[i] == '\n' && len(delim) == 1:
			return -1
		}
	}
	return -1
}

// position is the 1-based line and column (in code points) of byte offset off in s.
func position(s string, off int) (line, col int) {
	before := s[:off]
	line = strings.Count(before, "\n") + 1
	return line, utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
}

// shiftError moves an expression's compile error to its place in the template around it.
func shiftError(err error, s string, start int) error {
	ce, ok := err.(*Error)
	if !ok {
		return err
	}
	line, col := position(s, start)
	shifted := *ce
	shifted.Line = line + ce.Line - 1
	if ce.Line == 1 {
		shifted.Column = col + ce.Column - 1
	}
	return &shifted
}

// FieldError is a failure at one string inside a value given to RenderValue. Path holds map
// keys (string) and list indices (int) from the root.
type FieldError struct {
	Path []any
	Err  error
}

func (e *FieldError) Error() string { return fmt.Sprintf("at %v: %v", e.Path, e.Err) }

func (e *FieldError) Unwrap() error { return e.Err }

// FieldErrors are all the failures of one RenderValue.
type FieldErrors []*FieldError

func (es FieldErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// RenderValue renders every string inside v (maps and slices are walked; other values are kept)
// into a new value. A string that fails becomes nil and is reported in the FieldErrors returned.
func (e *Env) RenderValue(v any, vars Vars) (any, error) {
	var errs FieldErrors
	out := e.renderValue(v, vars, nil, &errs)
	if len(errs) > 0 {
		return out, errs
	}
	return out, nil
}

func (e *Env) renderValue(v any, vars Vars, path []any, errs *FieldErrors) any {
	switch v := v.(type) {
	case string:
		out, err := e.Render(v, vars)
		if err != nil {
			*errs = append(*errs, &FieldError{Path: append([]any(nil), path...), Err: err})
			return nil
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) { // sorted, so errors come in a stable order
			out[k] = e.renderValue(v[k], vars, append(path, k), errs)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e2 := range v {
			out[i] = e.renderValue(e2, vars, append(path, i), errs)
		}
		return out
	}
	return v
}
