package sessiondb

import "github.com/hangar-dev/hangar/platform/states"

// Status is where a session is in its life.
type Status string

// Session states. A session is running while its sandbox is up and busy, idle while it is up and
// quiet; evicted sessions live only in their checkpoint until Resume places them on a host.
const (
	Creating     Status = "creating"
	Running      Status = "running"
	Idle         Status = "idle"
	Snapshotting Status = "snapshotting"
	Evicted      Status = "evicted"
	Resuming     Status = "resuming"
	// Lost is a session whose host stopped heartbeating, or whose sandbox died under a live
	// host: its sandbox is gone, its checkpoints are not, and Resume brings it back.
	Lost    Status = "lost"
	Failed  Status = "failed"
	Deleted Status = "deleted"
)

// moves is the session state machine in lifecycle order: each state and where it may go.
// Deleted is reachable from every state and failed from every live one; both are listed so the
// table stays the one place that says what is allowed.
var moves = states.Table[Status]{
	{From: Creating, To: []Status{Running, Failed, Lost, Deleted}},
	{From: Running, To: []Status{Idle, Snapshotting, Evicted, Failed, Lost, Deleted}},
	{From: Idle, To: []Status{Running, Snapshotting, Evicted, Failed, Lost, Deleted}},
	// A snapshot returns the session to where it was, or ends in eviction.
	{From: Snapshotting, To: []Status{Running, Idle, Evicted, Failed, Lost, Deleted}},
	{From: Evicted, To: []Status{Resuming, Deleted}},
	{From: Resuming, To: []Status{Running, Failed, Lost, Deleted}},
	{From: Lost, To: []Status{Resuming, Deleted}},
	// A failed session resumes from its last checkpoint when it has one.
	{From: Failed, To: []Status{Resuming, Deleted}},
	{From: Deleted},
}

// Statuses lists every state in lifecycle order.
func Statuses() []Status {
	return moves.States()
}

// CanMove reports whether a session may go from one state to another. Staying put is not a move.
func CanMove(from, to Status) bool {
	return moves.CanMove(from, to)
}

// Live reports whether a session in state s has (or is getting) a sandbox on its host.
func (s Status) Live() bool {
	switch s {
	case Creating, Running, Idle, Snapshotting, Resuming:
		return true
	}
	return false
}

// Resumable reports whether Resume may bring a session in state s back.
func (s Status) Resumable() bool { return CanMove(s, Resuming) }
