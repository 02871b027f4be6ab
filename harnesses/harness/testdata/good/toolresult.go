//go:build wasip1 && toolresult

package main

import (
	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/echo"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/guest"
)

// toolResult is the optional export, built in with -tags toolresult.
//
//go:wasmexport hangar_tool_result
func toolResult(ptr, size int32) uint64 {
	var req abi.ToolResultRequest
	if err := guest.Decode(ptr, size, &req); err != nil {
		return guest.Error(err.Error())
	}
	res, err := echo.ToolResult(req)
	if err != nil {
		return guest.Error(err.Error())
	}
	return guest.OK(res)
}
