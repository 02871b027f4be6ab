//go:build wasip1

// Command good is the echo harness as a plugin (see package echo). Built with -tags badversion
// it claims another ABI version, with -tags noplan it lacks hangar_plan, with -tags toolresult it
// exports the optional hangar_tool_result and with -tags badtoolresult a wrong one.
package main

import (
	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/echo"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/guest"
)

func main() {}

//go:wasmexport hangar_alloc
func alloc(size int32) int32 { return guest.Alloc(size) }

//go:wasmexport hangar_describe
func describe() uint64 { return guest.OK(echo.Descriptor()) }

//go:wasmexport hangar_parse
func parse(ptr, size int32) uint64 {
	var req abi.ParseRequest
	if err := guest.Decode(ptr, size, &req); err != nil {
		return guest.Error(err.Error())
	}
	return guest.OK(echo.Parse(req))
}
