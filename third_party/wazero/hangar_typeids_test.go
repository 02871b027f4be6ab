package wazero

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero/internal/testing/binaryencoding"
	"github.com/tetratelabs/wazero/internal/testing/require"
	"github.com/tetratelabs/wazero/internal/wasm"
)

// TestHangarInstantiateOnAnotherRuntimeOfTheSameCache is Hangar's regression test for wazero
// #2511: a module compiled by one runtime and instantiated by another that shares its
// compilation cache must match its imports with the instantiating store's type IDs, which
// number the same signature differently when the stores saw types in another order.
func TestHangarInstantiateOnAnotherRuntimeOfTheSameCache(t *testing.T) {
	ctx := context.Background()
	cache := NewCompilationCache()
	defer cache.Close(ctx)
	config := NewRuntimeConfig().WithCompilationCache(cache)

	compiling := NewRuntimeWithConfig(ctx, config)
	defer compiling.Close(ctx)
	instantiating := NewRuntimeWithConfig(ctx, config)
	defer instantiating.Close(ctx)

	// The instantiating store numbers (i32) -> i32 first, as 0.
	_, err := instantiating.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func(x uint32) uint32 { return x + 1 }).Export("inc").
		Instantiate(ctx)
	require.NoError(t, err)

	// The compiling store numbers () -> () as 0 and (i32) -> i32 as 1.
	i32 := []wasm.ValueType{wasm.ValueTypeI32}
	bin := binaryencoding.EncodeModule(&wasm.Module{
		TypeSection: []wasm.FunctionType{{}, {Params: i32, Results: i32}},
		ImportSection: []wasm.Import{
			{Type: wasm.ExternTypeFunc, Module: "env", Name: "inc", DescFunc: 1},
		},
		FunctionSection: []wasm.Index{1},
		CodeSection: []wasm.Code{{Body: []byte{
			wasm.OpcodeLocalGet, 0, wasm.OpcodeCall, 0, wasm.OpcodeEnd,
		}}},
		ExportSection: []wasm.Export{{Type: wasm.ExternTypeFunc, Name: "inc_via_import", Index: 1}},
	})
	compiled, err := compiling.CompileModule(ctx, bin)
	require.NoError(t, err)

	mod, err := instantiating.InstantiateModule(ctx, compiled, NewModuleConfig())
	require.NoError(t, err)
	res, err := mod.ExportedFunction("inc_via_import").Call(ctx, 41)
	require.NoError(t, err)
	require.Equal(t, []uint64{42}, res)
}
