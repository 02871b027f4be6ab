// Package states is the one shape of Hangar's state machines: a table listing each state, in
// lifecycle order, with the states it may move to. Every record with a state (tasks, sessions,
// automation runs and their steps) keeps its table in code and asks it the same two questions,
// so the table is the one place that says what is allowed.
package states

import "slices"

// Move is one state and the states it may move to.
type Move[S comparable] struct {
	From S
	To   []S
}

// Table is a state machine, its states in lifecycle order.
type Table[S comparable] []Move[S]

// States lists every state in lifecycle order.
func (t Table[S]) States() []S {
	out := make([]S, len(t))
	for i, m := range t {
		out[i] = m.From
	}
	return out
}

// CanMove reports whether the table allows from → to. Staying put is not a move.
func (t Table[S]) CanMove(from, to S) bool {
	for _, m := range t {
		if m.From == from {
			return slices.Contains(m.To, to)
		}
	}
	return false
}
