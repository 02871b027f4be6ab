//go:build wasip1

// Command hostile is a plugin that misbehaves on request: its parse does what the chunk names
// and its plan what the prompt names, so that one module covers every way a plugin can fail the
// host. Anything else gets a well-formed answer.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness/testdata/guest"
)

func main() {}

//go:wasmexport hangar_abi_version
func version() int32 { return abi.Version }

//go:wasmexport hangar_alloc
func alloc(size int32) int32 { return guest.Alloc(size) }

//go:wasmexport hangar_describe
func describe() uint64 { return guest.OK(abi.Descriptor{Name: "hostile"}) }

//go:wasmexport hangar_plan
func plan(ptr, size int32) uint64 {
	var req abi.PlanRequest
	if err := guest.Decode(ptr, size, &req); err != nil {
		return guest.Error(err.Error())
	}
	if answer, ok := misbehave(req.Prompt); ok {
		return answer
	}
	switch req.Prompt {
	case "noargv":
		return guest.OK(abi.Plan{Argv: []string{}})
	case "sandbox":
		return guest.OK(abi.Plan{Argv: []string{"sandbox"}, Env: sandbox()})
	}
	return guest.OK(abi.Plan{Argv: []string{"true"}})
}

//go:wasmexport hangar_parse
func parse(ptr, size int32) uint64 {
	var req abi.ParseRequest
	if err := guest.Decode(ptr, size, &req); err != nil {
		return guest.Error(err.Error())
	}
	if answer, ok := misbehave(req.Chunk); ok {
		return answer
	}
	switch req.Chunk {
	case "badkind":
		return guest.Raw([]byte(`{"ok":{"events":[{"kind":"assistant.message","text":"fine"},{"kind":"assistant.thought"}]}}`))
	}
	return guest.OK(abi.ParseResult{Events: []abi.Event{{Kind: abi.KindAssistantMessage, Text: req.Chunk}}})
}

// sandbox reports what the plugin can see of the host.
func sandbox() map[string]string {
	seen := map[string]string{
		"time": time.Now().UTC().Format(time.RFC3339),
		"args": strings.Join(os.Args, " "),
		"env":  strings.Join(os.Environ(), " "),
	}
	for _, dir := range []string{"/", ".", "/etc"} {
		if entries, err := os.ReadDir(dir); err == nil {
			seen["dir "+dir] = fmt.Sprint(len(entries), " entries")
		}
	}
	return seen
}

// hoard keeps what "oom" allocates reachable.
var hoard [][]byte

// misbehave does what name says, for any export that takes a request.
func misbehave(name string) (uint64, bool) {
	switch name {
	case "loop":
		for {
		}
	case "oom":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "panic":
		panic("hostile plugin panics as asked")
	case "trap":
		// Reads far past the end of linear memory: a wasm trap, not a Go panic.
		return uint64(*(*byte)(unsafe.Pointer(uintptr(0xfffffff0)))), true
	case "oob":
		return guest.Span(-65536, 100), true
	case "huge":
		return guest.Span(0, 1<<30), true
	case "empty":
		return guest.Span(0, 0), true
	case "badjson":
		return guest.Raw([]byte(`{"ok":{"events":[`)), true
	case "trailing":
		return guest.Raw([]byte(`{"ok":{}} {"ok":{}}`)), true
	case "both":
		return guest.Raw([]byte(`{"ok":{},"error":"and also no"}`)), true
	case "neither":
		return guest.Raw([]byte(`{}`)), true
	case "replyfield":
		return guest.Raw([]byte(`{"ok":{},"debug":true}`)), true
	case "resultfield":
		return guest.Raw([]byte(`{"ok":{"argv":["true"],"events":[],"extra":1}}`)), true
	case "refuse":
		return guest.Error("hostile plugin refuses as asked"), true
	}
	return 0, false
}
