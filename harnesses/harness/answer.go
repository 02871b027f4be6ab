package harness

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// harnessName is what a harness may be called: it appears in API records, task ids and paths.
var harnessName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func checkDescriptor(d *abi.Descriptor) error {
	if !harnessName.MatchString(d.Name) {
		return fmt.Errorf("a descriptor named %q; a name is 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", d.Name)
	}
	for _, list := range []struct {
		what    string
		options []abi.Option
	}{{"model", d.Models}, {"effort level", d.Effort}} {
		for i, o := range list.options {
			if o.ID == "" {
				return fmt.Errorf("a descriptor whose %s %d has no id", list.what, i)
			}
		}
	}
	for i, m := range d.Modes {
		if m.ID == "" {
			return fmt.Errorf("a descriptor whose mode %d has no id", i)
		}
	}
	return nil
}

func checkPlan(p *abi.Plan) error {
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return errors.New("a plan without a command (argv is empty)")
	}
	for i, f := range p.Files {
		if f.Path == "" {
			return fmt.Errorf("a plan whose file %d has no path", i)
		}
	}
	return nil
}

var eventKinds = func() map[string]bool {
	kinds := make(map[string]bool)
	for _, k := range abi.Kinds() {
		kinds[k] = true
	}
	return kinds
}()

func checkParseResult(r *abi.ParseResult) error {
	for i, e := range r.Events {
		if !eventKinds[e.Kind] {
			return fmt.Errorf("event %d of unknown kind %q", i, e.Kind)
		}
	}
	return nil
}
