package sdk

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/hangar-dev/hangar/harnesses/abi"
)

// Replay hands requests to h.Parse one after the other, each with the State the previous one
// returned, the way the host does for one run, and returns every event reported; an event of a
// kind abi does not describe, which the host would refuse, is an error. It lets a plugin's parser
// be tested natively on recorded output.
func Replay(h Harness, requests ...abi.ParseRequest) ([]abi.Event, error) {
	return ReplayResumed(h, "", requests...)
}

// ReplayResumed is Replay of a run that resumes a conversation with the hint resume, as the host
// hands every request of such a run (abi.ParseRequest.Resume).
func ReplayResumed(h Harness, resume string, requests ...abi.ParseRequest) ([]abi.Event, error) {
	var events []abi.Event
	state := ""
	for i, req := range requests {
		req.State, req.Resume = state, resume
		res, err := h.Parse(req)
		if err != nil {
			return events, fmt.Errorf("parse request %d: %w", i, err)
		}
		for _, e := range res.Events {
			if !slices.Contains(abi.Kinds(), e.Kind) {
				return events, fmt.Errorf("parse request %d: event of unknown kind %q", i, e.Kind)
			}
		}
		events = append(events, res.Events...)
		state = res.State
	}
	return events, nil
}

// Chunked cuts output of stream into requests of at most size bytes (or one character, when
// larger), as a harness's output may arrive: anywhere, even inside a line, but not inside a UTF-8
// sequence, which the JSON string of a request cannot carry.
func Chunked(stream, output string, size int) []abi.ParseRequest {
	var reqs []abi.ParseRequest
	for len(output) > 0 {
		n := min(size, len(output))
		for n < len(output) && !utf8.RuneStart(output[n]) {
			n++
		}
		reqs = append(reqs, abi.ParseRequest{Stream: stream, Chunk: output[:n]})
		output = output[n:]
	}
	return reqs
}

// Exited is the request that ends a run whose process exited with status.
func Exited(status int) abi.ParseRequest {
	return abi.ParseRequest{Final: true, ExitStatus: status}
}
