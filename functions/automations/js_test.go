package automations

import (
	"context"
	"testing"

	"github.com/hangar-dev/hangar/automation/jsbox"
)

// Where no JavaScript sandbox can be had, a code block saves (it is checked when it runs) and
// then fails its run as a script error, not a runtime failure that a retry could cure.
func TestWithoutASandboxCodeSavesAndFailsWhenRun(t *testing.T) {
	t.Parallel()
	none := func() (*jsbox.Box, error) { return nil, jsbox.ErrNotBuilt }
	if line, msg, ok := ScriptChecker(none)("return ("); !ok || line != 0 || msg != "" {
		t.Fatalf("ScriptChecker = %d, %q, %v; want the block to pass", line, msg, ok)
	}
	v, scriptErr, err := CodeRunner(none)(context.Background(), "return 1", nil)
	if err != nil || v != nil || scriptErr == nil {
		t.Fatalf("CodeRunner = %s, %v, %v; want a script error only", v, scriptErr, err)
	}
}
