package jsbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hangar-dev/hangar/automation/jsbox"
	"github.com/hangar-dev/hangar/automation/jsbox/internal/engine"
	"github.com/hangar-dev/hangar/automation/jsbox/internal/protocol"
)

// benchSource is a small automation step: read the event, compute, log, return an object.
const benchSource = `const total = input.items.reduce((sum, it) => sum + it.price * it.qty, 0)
console.log("order", input.id, "total", total)
return {id: input.id, total, big: total > 100}`

var benchVars = map[string]json.RawMessage{
	"input": json.RawMessage(`{"id":"o-1","items":[{"price":12.5,"qty":2},{"price":99,"qty":1},{"price":3,"qty":7}]}`),
}

func benchEval(b *testing.B, box *jsbox.Box) {
	res, err := box.Eval(context.Background(), benchSource, benchVars)
	if err != nil || res.Err != nil {
		b.Fatalf("Eval: %v, %v", err, res.Err)
	}
}

// BenchmarkEvalWarm evaluates on a pooled instance: a fresh JavaScript runtime in a warm
// WebAssembly instance.
func BenchmarkEvalWarm(b *testing.B) {
	box := newBox(b, jsbox.Options{PoolSize: 1})
	benchEval(b, box) // make the instance
	for b.Loop() {
		benchEval(b, box)
	}
}

// BenchmarkEvalFresh evaluates on a new instance each time, as after a timeout: each iteration
// takes a new Box, whose first evaluation instantiates the guest; compiling it (from the warm
// cache) and closing the box are not timed.
func BenchmarkEvalFresh(b *testing.B) {
	newBox(b, jsbox.Options{}) // fill the compilation cache
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		box, err := jsbox.New(ctx, jsbox.Options{CacheDir: cacheDir, PoolSize: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		benchEval(b, box)
		b.StopTimer()
		box.Close(ctx)
		b.StartTimer()
	}
}

// BenchmarkEvalNativeGoja is the baseline: the same evaluation, a fresh goja runtime included,
// in-process without the sandbox.
func BenchmarkEvalNativeGoja(b *testing.B) {
	req := protocol.Request{Source: benchSource, Vars: benchVars}
	for b.Loop() {
		if resp := engine.Eval(req); resp.Error != nil {
			b.Fatal(resp.Error)
		}
	}
}
