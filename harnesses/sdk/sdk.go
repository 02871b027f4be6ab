// Package sdk lets a harness plugin be written in plain Go. The author implements Harness in a
// `package main` and registers it from init, in a file built for wasip1 only (so that no native
// binary of a plugin named, say, bash can be installed by mistake):
//
//	//go:build wasip1
//
//	package main
//
//	func main() {} // never called: the module is a reactor, but Go requires main
//
//	func init() { sdk.Register(myHarness{}) }
//
// and builds it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o x.wasm .
//
// (c-shared keeps the exports callable after initialisation). The SDK exports the functions of
// abi version 1 (exports.go, wasip1 only) — the optional hangar_tool_result only for a main
// package that also imports harnesses/sdk/toolresults (see ToolResulter) — and does the plumbing: requests are decoded from the
// buffer handed out by hangar_alloc, the author's result or error becomes an abi.Reply kept alive
// until the host has read it, and a panic in the author's code becomes an error reply instead of
// a trap. The plumbing itself is here, free of build tags, so it is tested natively; so can the
// author's harness be, with Replay.
//
// The package also holds what parsers of harness output share: LineBuffer for output that
// arrives in chunks, Turn for ending a run the same way however the harness stops, the State
// codec, and the checks of a PlanRequest against the descriptor.
package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Harness is what a plugin implements. Each method must be pure: the same request gives the same
// answer, and Parse keeps what it needs between chunks in ParseResult.State.
type Harness interface {
	Describe() abi.Descriptor
	Plan(abi.PlanRequest) (abi.Plan, error)
	Parse(abi.ParseRequest) (abi.ParseResult, error)
}

// ToolResulter is a Harness that takes client tool results (abi's "Client-side tools"): its
// plans set KeepStdin, its parser reports the calls it waits on with Event.Client, and
// ToolResult says what to write to its stdin. Like the other methods it must be pure. A module
// exports hangar_tool_result only when its main package also imports harnesses/sdk/toolresults,
// so a harness without client tools answers the host "takes none" without being asked.
type ToolResulter interface {
	Harness
	ToolResult(abi.ToolResultRequest) (abi.ToolResult, error)
}

// registered is the module's harness; the exports answer with an error until it is set.
var registered Harness

// Register makes h the harness this module serves. Call it once, from an init function.
func Register(h Harness) {
	if registered != nil {
		panic("sdk: Register called twice")
	}
	if h == nil {
		panic("sdk: Register called with a nil Harness")
	}
	registered = h
}

var errNotRegistered = errors.New("no harness registered: call sdk.Register from an init function")

// describe answers hangar_describe.
func describe(h Harness) []byte {
	return answer("Describe", func() (any, error) {
		if h == nil {
			return nil, errNotRegistered
		}
		return h.Describe(), nil
	})
}

// plan answers hangar_plan for the JSON request req.
func plan(h Harness, req []byte) []byte {
	return answer("Plan", func() (any, error) {
		return call(h, req, Harness.Plan)
	})
}

// parse answers hangar_parse for the JSON request req.
func parse(h Harness, req []byte) []byte {
	return answer("Parse", func() (any, error) {
		return call(h, req, Harness.Parse)
	})
}

// parseRaw answers hangar_parse_raw for req: the JSON of a ParseRequest without its chunk, a
// newline, then the chunk's bytes.
func parseRaw(h Harness, req []byte) []byte {
	return answer("Parse", func() (any, error) {
		header, chunk, ok := bytes.Cut(req, []byte{'\n'})
		if !ok {
			return nil, errors.New("a raw parse request without the newline after its header")
		}
		return call(h, header, func(h Harness, r abi.ParseRequest) (abi.ParseResult, error) {
			r.Chunk = string(chunk)
			return h.Parse(r)
		})
	})
}

// toolResult answers hangar_tool_result for the JSON request req.
func toolResult(h Harness, req []byte) []byte {
	return answer("ToolResult", func() (any, error) {
		return call(h, req, func(h Harness, r abi.ToolResultRequest) (abi.ToolResult, error) {
			tr, ok := h.(ToolResulter)
			if !ok {
				return abi.ToolResult{}, fmt.Errorf("harness %s takes no client tool results: it does not implement sdk.ToolResulter", h.Describe().Name)
			}
			return tr.ToolResult(r)
		})
	})
}

// call decodes a request of type Req and hands it to method of h.
func call[Req, Res any](h Harness, payload []byte, method func(Harness, Req) (Res, error)) (any, error) {
	if h == nil {
		return nil, errNotRegistered
	}
	var req Req
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("decode request: %w", err)
	}
	return method(h, req)
}

// answer runs fn and encodes what it returns as a Reply: the result as OK, an error or a panic
// (the author's code runs inside fn) as Error.
func answer(what string, fn func() (any, error)) (reply []byte) {
	defer func() {
		if r := recover(); r != nil {
			reply = errorReply(fmt.Sprintf("%s panicked: %v", what, r))
		}
	}()
	result, err := fn()
	if err != nil {
		return errorReply(err.Error())
	}
	ok, err := json.Marshal(result)
	if err != nil {
		return errorReply(fmt.Sprintf("encode %s result: %v", what, err))
	}
	reply, err = json.Marshal(abi.Reply{OK: ok})
	if err != nil {
		return errorReply(fmt.Sprintf("encode %s reply: %v", what, err))
	}
	return reply
}

// errorReply encodes msg as a Reply error; an empty message would make a reply with neither
// field, which the host refuses.
func errorReply(msg string) []byte {
	if msg == "" {
		msg = "unknown error"
	}
	b, err := json.Marshal(abi.Reply{Error: msg})
	if err != nil {
		// A Reply of one string field always encodes; keep the module answering regardless.
		return []byte(`{"error":"cannot encode error reply"}`)
	}
	return b
}

// DecodeState reads a ParseRequest.State written by EncodeState into v; the empty State of a
// run's first chunk leaves v as it is.
func DecodeState(state string, v any) error {
	if state == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(state), v); err != nil {
		return fmt.Errorf("decode parse state: %w", err)
	}
	return nil
}

// EncodeState writes v as a ParseResult.State.
func EncodeState(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode parse state: %w", err)
	}
	return string(b), nil
}
