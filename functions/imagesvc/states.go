package imagesvc

import "github.com/hangar-dev/hangar/platform/states"

// State is where an enable job is. The stages run in this order; warming only when the
// image's config has a warm command.
type State string

// The enable job's states.
const (
	// Queued: created, waiting for a worker.
	Queued State = "queued"
	// Resolving: the tag is being resolved to the linux/amd64 image manifest digest.
	Resolving State = "resolving"
	// Pulling: a host pulls the digest and unpacks its layers (the safe unpacker).
	Pulling State = "pulling"
	// Chunking: the host cuts each layer into content-defined chunks in the snapshot chunk store.
	Chunking State = "chunking"
	// Prestaging: the live hosts stage the image from its chunks into their caches.
	Prestaging State = "prestaging"
	// Warming: a sandbox of the image runs the warm command; its changes become the warm layer.
	Warming State = "warming"
	// Ready: the image record now points at this job's digest (and warm layer): sessions use it.
	Ready State = "ready"
	// Failed: a stage failed; error names it. RetryEnableJob resumes from that stage.
	Failed State = "failed"
	// Superseded: a newer job of the same image replaced this one before it was ready.
	Superseded State = "superseded"
)

// Table is the enable job's state machine: every move a job may make.
var Table = states.Table[State]{
	{From: Queued, To: []State{Resolving, Failed, Superseded}},
	{From: Resolving, To: []State{Pulling, Failed, Superseded}},
	{From: Pulling, To: []State{Chunking, Failed, Superseded}},
	{From: Chunking, To: []State{Prestaging, Failed, Superseded}},
	{From: Prestaging, To: []State{Warming, Ready, Failed, Superseded}},
	{From: Warming, To: []State{Ready, Failed, Superseded}},
	{From: Ready},
	// A retry goes back to the stage that failed.
	{From: Failed, To: []State{Resolving, Pulling, Chunking, Prestaging, Warming, Superseded}},
	{From: Superseded},
}

// Ended reports whether a job in s does no more work by itself.
func (s State) Ended() bool { return s == Ready || s == Failed || s == Superseded }

// next is the stage after s for a job with or without a warm command.
func next(s State, warm bool) State {
	switch s {
	case Queued:
		return Resolving
	case Resolving:
		return Pulling
	case Pulling:
		return Chunking
	case Chunking:
		return Prestaging
	case Prestaging:
		if warm {
			return Warming
		}
		return Ready
	default:
		return Ready
	}
}
