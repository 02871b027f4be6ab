package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// A harness plugin follows runtimes/wasm's calling convention, so the test plugins serve as
// plain modules of it too.

// loadModule loads a test plugin as a module of runtimes/wasm that need export only.
func loadModule(rt *wasm.Runtime, name string, module []byte, export string) (*wasm.Module, error) {
	return rt.Load(context.Background(), wasm.Spec{Kind: harness.Kind, Name: name, Exports: map[string]wasm.Signature{export: wasm.RequestAnswer}}, module)
}

func TestModuleCallsItsExportsOnPooledInstances(t *testing.T) {
	ctx := context.Background()
	x, err := loadModule(newRuntime(t, wasm.Options{Instances: 1}), "echo", guest(t, "good"), abi.ExportPlan)
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
	if _, err := x.Call(ctx, abi.ExportPlan, abi.PlanRequest{}); !errors.Is(err, wasm.ErrRefused) {
		t.Fatalf("a request the reactor refuses: %v, want ErrRefused", err)
	}
	if _, err := x.Call(ctx, abi.ExportParse, abi.ParseRequest{}); err == nil || !strings.Contains(err.Error(), "not one of its exports") {
		t.Fatalf("calling an export not loaded: %v", err)
	}
}

func TestModuleFailureCostsOnlyItsInstance(t *testing.T) {
	ctx := context.Background()
	x, err := loadModule(hostileRuntime(t), "hostile", guest(t, "hostile"), abi.ExportParse)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(ctx) })
	for _, tc := range []struct {
		input string
		want  error
	}{{"panic", wasm.ErrTrap}, {"oom", wasm.ErrMemory}} {
		_, err := x.Call(ctx, abi.ExportParse, abi.ParseRequest{Stream: "stdout", Chunk: tc.input})
		checkPluginError(t, err, tc.want, abi.ExportParse, "")
		if _, err := x.Call(ctx, abi.ExportParse, abi.ParseRequest{Stream: "stdout", Chunk: "fine"}); err != nil {
			t.Fatalf("the call after %s: %v", tc.input, err)
		}
	}
}

func TestLoadRefusesAModuleWithoutItsSpecsExports(t *testing.T) {
	_, err := loadModule(newRuntime(t, wasm.Options{}), "echo", guest(t, "good"), "jsbox_eval")
	if !errors.Is(err, wasm.ErrBadModule) || !strings.Contains(err.Error(), "does not export jsbox_eval") {
		t.Fatalf("Load without the export: %v, want ErrBadModule naming it", err)
	}
}
