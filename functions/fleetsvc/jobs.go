package fleetsvc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// jobTimeout bounds one drain or evacuation: a session that will not move by then is reported
// and left.
const jobTimeout = 15 * time.Minute

// retryEvery is how often a drain looks again at sessions in passing states (creating,
// resuming, snapshotting), which it cannot move until they settle.
const retryEvery = 500 * time.Millisecond

// start writes a new job and runs it in the background of this instance: the caller follows
// it with GetFleetJob. A job whose instance dies stops where it was; running the drain or
// evacuation again carries on, as both only move what is still on the host.
func (s *Service) start(ctx context.Context, kind, hostID string, force bool, run func(context.Context, *fleet.Job) error) (*fleet.Job, error) {
	j := &fleet.Job{ID: ids.New(jobPrefix), Kind: kind, HostID: hostID, Force: force}
	if err := s.fleet.CreateJob(ctx, j); err != nil {
		return nil, err
	}
	shown := *j
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jobTimeout)
		defer cancel()
		if err := run(ctx, j); err != nil {
			j.State, j.Message = fleet.JobFailed, err.Error()
		}
		if err := s.fleet.SaveJob(context.WithoutCancel(ctx), j); err != nil {
			s.d.Log.Error("save fleet job", "job", j.ID, "err", err)
		}
	}()
	return &shown, nil
}

// outcome is what became of one session.
type outcome int

const (
	pending  outcome = iota // in a passing state: look again
	moved                   // resumed on another host
	evicted                 // idle, evicted; resumes where it is next used
	archived                // checkpointed and evicted (or left lost), no other host had room
	failed                  // left where it was
)

// tally counts o for session id in j (why for a failure) and saves the progress.
func (s *Service) tally(ctx context.Context, j *fleet.Job, id string, o outcome, why string) {
	switch o {
	case moved:
		j.Moved++
	case evicted:
		j.Evicted++
	case archived:
		j.Archived++
	case failed:
		j.Failed++
		j.Failures = append(j.Failures, id+": "+why)
	}
	if err := s.fleet.SaveJob(ctx, j); err != nil {
		s.d.Log.Warn("save fleet job progress", "job", j.ID, "err", err)
	}
}

// drain moves every session off the host, pass after pass until none is left but those it
// failed to move, then marks the host drained (or leaves it draining, saying why).
func (s *Service) drain(ctx context.Context, j *fleet.Job) error {
	h, err := s.fleet.Get(ctx, j.HostID)
	if err != nil {
		return err
	}
	client := s.d.Hosts.Client(h.Address)
	seen, done := map[string]bool{}, map[string]bool{}
	for {
		recs, err := s.d.Store.ListByHost(ctx, j.HostID, onHost...)
		if err != nil {
			return fmt.Errorf("sessions of host %s: %w", j.HostID, err)
		}
		waiting := 0
		for _, r := range recs {
			if done[r.ID] || r.Status == sessiondb.Lost {
				// Lost sessions have no sandbox here to move; Resume brings them back anywhere.
				continue
			}
			if !seen[r.ID] {
				seen[r.ID] = true
				j.Total = len(seen)
			}
			o, why := s.moveOff(ctx, client, r, j.Force)
			if o == pending {
				waiting++
				continue
			}
			done[r.ID] = true
			s.tally(ctx, j, r.ID, o, why)
		}
		if waiting == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain of %s stopped with %d sessions still settling: %w", j.HostID, waiting, ctx.Err())
		case <-time.After(retryEvery):
		}
	}
	summary := fmt.Sprintf("%d sessions: %d moved to other hosts, %d idle evicted, %d archived, %d failed", j.Total, j.Moved, j.Evicted, j.Archived, j.Failed)
	if j.Archived > 0 {
		summary += "; archived sessions were checkpointed and evicted because no other host had room: they resume on the next call that needs them"
	}
	if j.Failed > 0 {
		j.State, j.Message = fleet.JobFailed, summary+"; the host stays draining (see failures; drain again, with force to evict sessions whose checkpoint fails)"
		return nil
	}
	if _, err := s.fleet.Move(ctx, j.HostID, fleet.Drained, nil); err != nil {
		return fmt.Errorf("%s; but the host could not be marked drained: %w", summary, err)
	}
	s.d.Hosts.Forget()
	j.State, j.Message = fleet.JobSucceeded, summary+"; the host is drained"
	return nil
}

// moveOff moves one session off its host: an idle one is evicted with a checkpoint; any other
// is checkpointed, evicted and resumed on another host, or archived (left evicted) when no
// host has room. With force, a session whose checkpoint fails is evicted to its last one.
func (s *Service) moveOff(ctx context.Context, client hostv1connect.HostServiceClient, r *sessiondb.Record, force bool) (outcome, string) {
	switch r.Status {
	case sessiondb.Creating, sessiondb.Resuming, sessiondb.Snapshotting:
		return pending, ""
	}
	idle := r.Status == sessiondb.Idle
	_, err := client.Evict(ctx, connect.NewRequest(&hostv1.EvictRequest{SessionId: r.ID, Snapshot: true, Reason: "host drain"}))
	if err != nil && force && r.LatestSnapshotID != "" {
		_, ferr := client.Evict(ctx, connect.NewRequest(&hostv1.EvictRequest{SessionId: r.ID, Reason: "host drain (forced: its fresh checkpoint failed)"}))
		if ferr == nil {
			err = nil
		} else {
			err = errors.Join(err, ferr)
		}
	}
	if err != nil {
		if cur, gerr := s.d.Store.Get(ctx, r.ID); gerr == nil && (cur.Status != r.Status || cur.HostID != r.HostID) {
			// It moved meanwhile (a checkpoint of its own, a delete): look at it again.
			return pending, ""
		}
		return failed, "checkpoint and evict: " + err.Error()
	}
	if idle {
		return evicted, ""
	}
	return s.relocate(ctx, r.ID)
}

// relocate resumes an evicted or lost session elsewhere: moved, or archived when no host has
// room (it stays evicted or lost with its checkpoint).
func (s *Service) relocate(ctx context.Context, id string) (outcome, string) {
	_, err := s.d.Sessions.Relocate(ctx, id)
	switch {
	case err == nil:
		return moved, ""
	case connect.CodeOf(err) == connect.CodeUnavailable:
		return archived, ""
	default:
		return failed, "resume elsewhere: " + err.Error()
	}
}

// evacuate marks the live sessions of a lost host lost and resumes every one with a checkpoint
// on another host; those without one are named and left lost.
func (s *Service) evacuate(ctx context.Context, j *fleet.Job) error {
	recs, err := s.d.Store.ListByHost(ctx, j.HostID, onHost...)
	if err != nil {
		return fmt.Errorf("sessions of host %s: %w", j.HostID, err)
	}
	j.Total = len(recs)
	for _, r := range recs {
		if r.Status != sessiondb.Lost {
			_, _, err := s.d.Store.Move(ctx, r.ID, sessiondb.Lost, "host "+j.HostID+" evacuated", func(cur *sessiondb.Record) error {
				if cur.HostID != j.HostID {
					return errMovedOn
				}
				return nil
			})
			var me *sessiondb.MoveError
			if errors.Is(err, errMovedOn) || errors.As(err, &me) {
				j.Total--
				continue
			}
			if err != nil {
				s.tally(ctx, j, r.ID, failed, "mark lost: "+err.Error())
				continue
			}
		}
		if r.LatestSnapshotID == "" {
			j.WithoutCheckpoint = append(j.WithoutCheckpoint, r.ID)
			s.tally(ctx, j, r.ID, pending, "") // counts nothing; saves the progress
			continue
		}
		o, why := s.relocate(ctx, r.ID)
		s.tally(ctx, j, r.ID, o, why)
	}
	j.State = fleet.JobSucceeded
	j.Message = fmt.Sprintf("%d sessions: %d resumed on other hosts, %d left lost with their checkpoints because no host had room, %d failed",
		j.Total, j.Moved, j.Archived, j.Failed)
	if len(j.WithoutCheckpoint) > 0 {
		j.Message += fmt.Sprintf("; %d had no checkpoint and stay lost (resuming one starts it afresh from its image): %s",
			len(j.WithoutCheckpoint), strings.Join(j.WithoutCheckpoint, ", "))
	}
	if j.Failed > 0 {
		j.State = fleet.JobFailed
	}
	return nil
}

// errMovedOn skips a session that left the host before the evacuation reached it.
var errMovedOn = errors.New("the session left the host")
