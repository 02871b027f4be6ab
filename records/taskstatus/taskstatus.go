// Package taskstatus owns a task's status as its sessions make it: the task state machine (the
// one table of a status's allowed moves), how a session's transitions and its agent's turns map
// onto it, and the checked write of a task's status and status_reason. TaskService owns the rest
// of the task record (`tasks/{id}`); the writers of sessions (the host that runs one, the API
// that deletes one) move their task through this package as things happen, so that the stored
// status is always the current one and ListTasks can filter and order on it.
package taskstatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/states"
)

// Collection is the Firestore collection of task records.
const Collection = "tasks"

// Task states.
const (
	Pending   = "pending"
	Running   = "running"
	Waiting   = "waiting"
	Completed = "completed"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// moves is the task state machine, in lifecycle order: each state and the states it may move
// to. A new task is pending until its first session starts; waiting means its agent finished a
// turn and needs the user; completed means the user (or the automation that started it) closed
// a task whose agent had finished, so only waiting gets there.
var moves = states.Table[string]{
	{From: Pending, To: []string{Running, Failed, Cancelled}},
	{From: Running, To: []string{Waiting, Failed, Cancelled}},
	{From: Waiting, To: []string{Running, Completed, Failed, Cancelled}},
	// A finished or failed task runs again on a follow-up prompt or a resume, as agent
	// dashboards allow (and as closed issues reopen).
	{From: Completed, To: []string{Running}},
	{From: Failed, To: []string{Running}},
	// Cancelling is the user's explicit stop: nothing restarts the task behind their back.
	{From: Cancelled},
}

// States returns every task state in lifecycle order.
func States() []string { return moves.States() }

// CanMove reports whether a task may move from one state to another. Staying in a state is not
// a move.
func CanMove(from, to string) bool { return moves.CanMove(from, to) }

// ErrMove is a move the table refuses; Move wraps it with both states.
var ErrMove = errors.New("task status move not allowed")

// Store writes task statuses.
type Store struct {
	db  *firestore.Client
	now func() time.Time
}

// NewStore returns a store over db that stamps moves with now.
func NewStore(db *firestore.Client, now func() time.Time) *Store {
	return &Store{db: db, now: now}
}

// move moves task id from status from to status to with reason, inside tx, once the table
// allows it; staying in a state only updates the reason. It returns ErrMove (wrapped) for a
// refused move.
func (s *Store) move(tx *firestore.Transaction, id, from, to, reason string) error {
	if from != to && !CanMove(from, to) {
		return fmt.Errorf("task %s is %s: it cannot become %s: %w", id, from, to, ErrMove)
	}
	return tx.Update(s.db.Collection(Collection).Doc(id), []firestore.Update{
		{Path: "status", Value: to},
		{Path: "status_reason", Value: reason},
		{Path: "updated_at", Value: s.now()},
	})
}

// FollowSession moves the task whose primary session is sessionID to status to with reason, if
// the table allows the move from where the task is; a session of no task, or a move the table
// refuses (a completed task whose session is deleted stays completed), changes nothing.
func (s *Store) FollowSession(ctx context.Context, sessionID, to, reason string) error {
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snaps, err := tx.Documents(s.db.Collection(Collection).Where("session_ids", "array-contains", sessionID).
			Select("status", "session_ids").Limit(1)).GetAll()
		if err != nil {
			return err
		}
		if len(snaps) == 0 {
			return nil
		}
		var cur struct {
			Status     string   `firestore:"status"`
			SessionIDs []string `firestore:"session_ids"`
		}
		if err := snaps[0].DataTo(&cur); err != nil {
			return fmt.Errorf("decode task %s: %w", snaps[0].Ref.ID, err)
		}
		// Only the primary session speaks for the task; staying put is no write.
		if len(cur.SessionIDs) == 0 || cur.SessionIDs[0] != sessionID || cur.Status == to || !CanMove(cur.Status, to) {
			return nil
		}
		return s.move(tx, snaps[0].Ref.ID, cur.Status, to, reason)
	})
	if err != nil {
		return fmt.Errorf("move the task of session %s to %s: %w", sessionID, to, err)
	}
	return nil
}
