package sdk

import (
	"fmt"
	"strings"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// ResolveMode returns the mode a PlanRequest asks for: mode itself when d lists it, d's default
// mode when mode is "" ("" when d marks none). A mode d does not list is an error.
func ResolveMode(d abi.Descriptor, mode string) (string, error) {
	ids := make([]string, 0, len(d.Modes))
	for _, m := range d.Modes {
		if mode == "" && m.Default || mode != "" && m.ID == mode {
			return m.ID, nil
		}
		ids = append(ids, m.ID)
	}
	if mode == "" {
		return "", nil
	}
	return "", fmt.Errorf("%s has no mode %q (modes: %s)", d.Name, mode, strings.Join(ids, ", "))
}

// ResolveModel returns the model a PlanRequest asks for: model itself (a model d does not list
// is no error: a router may offer it), else d's default model ("" when d marks none). A harness
// passes it to its CLI, so the model a session runs on is the one the descriptor shows, not
// whatever the CLI's release defaults to.
func ResolveModel(d abi.Descriptor, model string) string {
	if model != "" {
		return model
	}
	for _, m := range d.Models {
		if m.Default {
			return m.ID
		}
	}
	return ""
}

// CheckEffort reports an error when effort is neither "" nor one of d's effort levels.
func CheckEffort(d abi.Descriptor, effort string) error {
	if effort == "" {
		return nil
	}
	ids := make([]string, 0, len(d.Effort))
	for _, o := range d.Effort {
		if o.ID == effort {
			return nil
		}
		ids = append(ids, o.ID)
	}
	return fmt.Errorf("%s has no effort level %q (levels: %s)", d.Name, effort, strings.Join(ids, ", "))
}

// Env copies base and sets each of defaults that base does not set, so that what the caller
// passes wins over what the plugin would choose.
func Env(base map[string]string, defaults map[string]string) map[string]string {
	env := make(map[string]string, len(base)+len(defaults))
	for k, v := range defaults {
		env[k] = v
	}
	for k, v := range base {
		env[k] = v
	}
	if len(env) == 0 {
		return nil
	}
	return env
}
