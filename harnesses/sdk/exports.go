//go:build wasip1

package sdk

import (
	"fmt"
	"unsafe"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// The host reads and writes these through the module's memory, where the garbage collector
// cannot see it: each stays referenced until the call after the one that handed it out.
var (
	// request is the buffer of the last hangar_alloc, which the host fills for the next call.
	request []byte
	// reply is the last answer, which the host reads before its next call.
	reply []byte
)

//go:wasmexport hangar_abi_version
func exportABIVersion() int32 { return abi.Version }

//go:wasmexport hangar_alloc
func exportAlloc(size int32) int32 {
	reply = nil
	if size < 0 {
		request = nil
		return 0
	}
	request = make([]byte, size)
	return address(request)
}

//go:wasmexport hangar_describe
func exportDescribe() uint64 { return send(describe(registered)) }

//go:wasmexport hangar_plan
func exportPlan(ptr, size int32) uint64 { return serve(ptr, size, plan) }

//go:wasmexport hangar_parse
func exportParse(ptr, size int32) uint64 { return serve(ptr, size, parse) }

//go:wasmexport hangar_parse_raw
func exportParseRaw(ptr, size int32) uint64 { return serve(ptr, size, parseRaw) }

// ServeToolResult answers hangar_tool_result for the request the host wrote at (ptr, size). It
// is for package toolresults, whose import is what makes a module export hangar_tool_result.
func ServeToolResult(ptr, size int32) uint64 { return serve(ptr, size, toolResult) }

// serve answers a call whose request the host wrote at (ptr, size), which must lie in the
// buffer of the last hangar_alloc: the module never reads memory it did not hand out.
func serve(ptr, size int32, handle func(Harness, []byte) []byte) uint64 {
	if ptr != address(request) || size < 0 || int(size) > len(request) {
		return send(errorReply(fmt.Sprintf("request (%d, %d) is not in the buffer from %s", ptr, size, abi.ExportAlloc)))
	}
	return send(handle(registered, request[:size]))
}

// send keeps b alive for the host and returns where it is, as ptr<<32 | len.
func send(b []byte) uint64 {
	reply = b
	return uint64(uint32(address(b)))<<32 | uint64(uint32(len(b)))
}

// address is where b starts in linear memory; wasm addresses fit in 32 bits.
func address(b []byte) int32 {
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
