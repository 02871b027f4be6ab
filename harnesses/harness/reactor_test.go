package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
)

// A harness plugin follows the reactor convention too, so the test plugins serve as reactors.

func TestReactorCallsItsExportsOnPooledInstances(t *testing.T) {
	ctx := context.Background()
	x, err := newRuntime(t, harness.Options{Instances: 1}).LoadReactor(ctx, "echo", guest(t, "good"), abi.ExportPlan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(ctx) })

	for _, prompt := range []string{"echo one", "echo two"} {
		out, err := x.Call(ctx, abi.ExportPlan, abi.PlanRequest{Prompt: prompt})
		var plan abi.Plan
		if err != nil || json.Unmarshal(out, &plan) != nil || plan.Argv[len(plan.Argv)-1] != prompt {
			t.Fatalf("Call(plan %q) = %s, %v", prompt, out, err)
		}
	}
	if _, err := x.Call(ctx, abi.ExportPlan, abi.PlanRequest{}); !errors.Is(err, harness.ErrRefused) {
		t.Fatalf("a request the reactor refuses: %v, want ErrRefused", err)
	}
	if _, err := x.Call(ctx, abi.ExportParse, abi.ParseRequest{}); err == nil || !strings.Contains(err.Error(), "not one of its exports") {
		t.Fatalf("calling an export not loaded: %v", err)
	}
}

func TestReactorFailureCostsOnlyItsInstance(t *testing.T) {
	ctx := context.Background()
	x, err := hostileRuntime(t).LoadReactor(ctx, "hostile", guest(t, "hostile"), abi.ExportParse)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(ctx) })
	for _, tc := range []struct {
		input string
		want  error
	}{{"panic", harness.ErrTrap}, {"oom", harness.ErrMemory}} {
		_, err := x.Call(ctx, abi.ExportParse, abi.ParseRequest{Stream: "stdout", Chunk: tc.input})
		checkPluginError(t, err, tc.want, abi.ExportParse, "")
		if _, err := x.Call(ctx, abi.ExportParse, abi.ParseRequest{Stream: "stdout", Chunk: "fine"}); err != nil {
			t.Fatalf("the call after %s: %v", tc.input, err)
		}
	}
}

func TestLoadReactorRefusesAModuleWithoutItsExports(t *testing.T) {
	_, err := newRuntime(t, harness.Options{}).LoadReactor(context.Background(), "echo", guest(t, "good"), "jsbox_eval")
	if !errors.Is(err, harness.ErrBadModule) || !strings.Contains(err.Error(), "does not export jsbox_eval") {
		t.Fatalf("LoadReactor without the export: %v, want ErrBadModule naming it", err)
	}
}
