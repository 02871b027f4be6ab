//go:build wasip1

package toolresults

import "github.com/hangar-dev/hangar/harnesses/sdk"

//go:wasmexport hangar_tool_result
func exportToolResult(ptr, size int32) uint64 { return sdk.ServeToolResult(ptr, size) }
