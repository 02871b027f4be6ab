package automations

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/jsbox"
	"github.com/hangar-dev/hangar/automation/runner"
)

// ScriptChecker compiles code blocks in the sandbox js gives when they are saved, so that a
// syntax error is a BlockError with its line rather than a failed run later. Without a sandbox
// here (js fails) they pass, and are checked when they run.
func ScriptChecker(js func() (*jsbox.Box, error)) definition.ScriptChecker {
	return func(source string) (int, string, bool) {
		box, err := js()
		if err != nil {
			return 0, "", true
		}
		se, err := box.Check(context.Background(), source)
		if err != nil || se == nil {
			return 0, "", true
		}
		return se.Line, se.Name + ": " + se.Message, false
	}
}

// CodeRunner runs code blocks in the sandbox js gives. Without a sandbox here (a binary built
// without the guest) the block fails, as retrying on this worker cannot help.
func CodeRunner(js func() (*jsbox.Box, error)) runner.CodeRunner {
	return func(ctx context.Context, source string, vars map[string]json.RawMessage) (json.RawMessage, error, error) {
		box, err := js()
		if err != nil {
			return nil, fmt.Errorf("JavaScript is not available here: %w", err), nil
		}
		res, err := box.Eval(ctx, source, vars)
		if err != nil || res.Err != nil {
			return nil, scriptErr(res.Err), err
		}
		return res.Value, nil, nil
	}
}

// scriptErr keeps a nil *jsbox.ScriptError a nil error.
func scriptErr(e *jsbox.ScriptError) error {
	if e == nil {
		return nil
	}
	return e
}
