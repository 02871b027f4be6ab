//go:build wasip1 && !noplan

package main

import (
	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/echo"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/guest"
)

// plan is left out with -tags noplan, for a module that lacks an export.
//
//go:wasmexport hangar_plan
func plan(ptr, size int32) uint64 {
	var req abi.PlanRequest
	if err := guest.Decode(ptr, size, &req); err != nil {
		return guest.Error(err.Error())
	}
	p, err := echo.Plan(req)
	if err != nil {
		return guest.Error(err.Error())
	}
	return guest.OK(p)
}
