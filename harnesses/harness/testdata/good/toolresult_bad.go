//go:build wasip1 && badtoolresult

package main

// toolResult has a signature the ABI does not describe; built with -tags badtoolresult.
//
//go:wasmexport hangar_tool_result
func toolResult(ptr int32) int32 { return ptr }
