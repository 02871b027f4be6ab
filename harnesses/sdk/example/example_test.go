package example_test

import (
	"testing"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/harnesses/sdk/example"
)

func TestEchoReportsEachLineThenEndsTheTurn(t *testing.T) {
	plan, err := example.Harness{}.Plan(abi.PlanRequest{Prompt: "hi"})
	if err != nil || len(plan.Argv) != 2 || plan.Argv[1] != "hi" {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	// Output split mid-line across chunks, as a process delivers it.
	events, err := sdk.Replay(example.Harness{}, append(sdk.Chunked("stdout", "one\ntwo\n", 3), sdk.Exited(0))...)
	if err != nil {
		t.Fatal(err)
	}
	kinds := ""
	for _, e := range events {
		kinds += e.Kind + ":" + e.Text + " "
	}
	if kinds != "assistant.message:one assistant.message:two turn.done: " {
		t.Fatalf("events %s", kinds)
	}
}
