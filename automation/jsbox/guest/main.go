//go:build wasip1

// Command guest is jsbox's JavaScript engine as a WASI reactor, built by `make plugins` to
// automation/jsbox/wasm/jsbox.wasm:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jsbox.wasm ./automation/jsbox/guest
//
// It exports hangar_alloc and protocol.ExportEval, following the harness plugins' calling
// convention (see harnesses/abi), and evaluates each request with package engine.
package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/hangar-dev/hangar/automation/jsbox/internal/engine"
	"github.com/hangar-dev/hangar/automation/jsbox/internal/protocol"
	"github.com/hangar-dev/hangar/harnesses/abi"
)

func main() {} // never called: the module is a reactor, but Go requires main

// maxStack bounds a goroutine's stack, so that Go recursion a script drives (parsing deeply
// nested source, stringifying deeply nested values) ends as a stack overflow the host can name
// rather than eating the memory cap.
const maxStack = 8 << 20

func init() { debug.SetMaxStack(maxStack) }

// The host reads and writes these through the module's memory, where the garbage collector
// cannot see it: each stays referenced until the call after the one that handed it out.
var request, reply []byte

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

//go:wasmexport jsbox_eval
func exportEval(ptr, size int32) uint64 {
	if ptr != address(request) || size < 0 || int(size) > len(request) {
		return send(abi.Reply{Error: fmt.Sprintf("request (%d, %d) is not in the buffer from %s", ptr, size, abi.ExportAlloc)})
	}
	var req protocol.Request
	err := json.Unmarshal(request[:size], &req)
	request = nil // the script may use the memory
	if err != nil {
		return send(abi.Reply{Error: fmt.Sprintf("decode request: %v", err)})
	}
	if req.MemoryLimitBytes > 0 {
		debug.SetMemoryLimit(req.MemoryLimitBytes * 3 / 4) // the rest for stacks and the runtime
	}
	ok, err := json.Marshal(engine.Eval(req))
	if err != nil {
		return send(abi.Reply{Error: fmt.Sprintf("encode response: %v", err)})
	}
	return send(abi.Reply{OK: ok})
}

// send keeps the encoded reply alive for the host and returns where it is, as ptr<<32 | len.
func send(r abi.Reply) uint64 {
	b, err := json.Marshal(r)
	if err != nil {
		b = []byte(`{"error":"encode reply"}`)
	}
	reply = b
	return uint64(uint32(address(b)))<<32 | uint64(uint32(len(b)))
}

// address is where b starts in linear memory; wasm addresses fit in 32 bits.
func address(b []byte) int32 {
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}
