package automations

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/schedule"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/config"
)

// Validator is the definition validator of the service: expressions compiled by env, cron
// expressions parsed by automation/schedule. Scripts are checked when they run.
func Validator(env *expr.Env) definition.Validator {
	return definition.Validator{Exprs: env, Cron: func(spec string) error {
		_, err := schedule.Parse(spec)
		return err
	}}
}

// problems collects what is wrong with a request, so that it hears about everything at once:
// each problem is a BadRequest field violation naming the request field, and a problem inside a
// definition, inputs, settings or overrides is also a BlockError detail naming the block and
// the field inside it.
type problems struct {
	apierr.Violations
	blocks []*appv1.BlockError
}

// addBlocks records errs as problems of the request field field.
func (p *problems) addBlocks(field string, errs []definition.BlockError) {
	for _, e := range errs {
		p.Add(field, e.Error())
		p.blocks = append(p.blocks, &appv1.BlockError{BlockId: e.BlockID, Field: e.Field, Code: e.Code, Message: e.Message})
	}
}

// Err is nil without problems, else invalid_argument with every violation and BlockError.
func (p *problems) Err() error {
	err := p.Violations.Err()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	for _, b := range p.blocks {
		if d, derr := connect.NewErrorDetail(b); derr == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}

// invalidBlocks is the error of one request field with errs.
func invalidBlocks(field string, errs []definition.BlockError) error {
	var p problems
	p.addBlocks(field, errs)
	return p.Err()
}

// name checks and trims an automation name: required, one line, at most lim.NameLen characters.
func (p *problems) name(field, s string, lim config.AutomationLimits) string {
	s = strings.TrimSpace(s)
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		p.Add(field, "is required")
	case n > lim.NameLen:
		p.Addf(field, "must be at most %d characters (is %d)", lim.NameLen, n)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		p.Add(field, "must not contain control characters (it is one line)")
	}
	return s
}

// description checks a description: any text of at most lim.DescriptionLen characters.
func (p *problems) description(field, s string, lim config.AutomationLimits) string {
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n > lim.DescriptionLen {
		p.Addf(field, "must be at most %d characters (is %d)", lim.DescriptionLen, n)
	}
	return s
}

// definition parses and validates a definition_json; ok is false when it has problems.
func (p *problems) definition(field, s string, lim config.AutomationLimits, v definition.Validator) (def definition.Definition, ok bool) {
	switch {
	case strings.TrimSpace(s) == "":
		p.Add(field, "is required")
		return def, false
	case len(s) > lim.DefinitionBytes:
		p.Addf(field, "must be at most %d bytes (is %d)", lim.DefinitionBytes, len(s))
		return def, false
	}
	def, errs := v.Load([]byte(s))
	p.addBlocks(field, errs)
	return def, len(errs) == 0
}

// jsonField checks the size of an inputs, overrides or settings JSON and returns it, "{}" for
// "" (none).
func (p *problems) jsonField(field, s string, lim config.AutomationLimits) (string, bool) {
	if strings.TrimSpace(s) == "" {
		return "{}", true
	}
	if len(s) > lim.JSONBytes {
		p.Addf(field, "must be at most %d bytes (is %d)", lim.JSONBytes, len(s))
		return s, false
	}
	return s, true
}

// inputs checks inputs_json against the inputs def declares.
func (p *problems) inputs(field, s string, def definition.Definition, lim config.AutomationLimits) string {
	s, ok := p.jsonField(field, s, lim)
	if ok {
		_, errs := definition.ValidateInputs(def.Inputs, []byte(s))
		p.addBlocks(field, errs)
	}
	return s
}

// settings checks a settings_json.
func (p *problems) settings(field, s string, lim config.AutomationLimits) string {
	s, ok := p.jsonField(field, s, lim)
	if ok {
		_, errs := definition.ParseSettings([]byte(s))
		p.addBlocks(field, errs)
	}
	return s
}

// overrides checks overrides_json by applying it to def and validating the result.
func (p *problems) overrides(field, s string, def definition.Definition, lim config.AutomationLimits, v definition.Validator) string {
	s, ok := p.jsonField(field, s, lim)
	if ok {
		_, errs := v.ApplyOverrides(def, []byte(s))
		p.addBlocks(field, errs)
	}
	return s
}
