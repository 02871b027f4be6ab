package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// hostCandidates are the hosts a new or resumed sandbox may go to, the most free first; a full
// fleet is unavailable, for the caller to retry.
func (s *Service) hostCandidates(ctx context.Context) ([]*fleet.Host, error) {
	hosts, err := s.d.Hosts.Candidates(ctx)
	if errors.Is(err, fleet.ErrNoHost) {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("no sandbox host has room; retry later"))
	}
	return hosts, err
}

// errMoved stops a re-placement whose session changed under it.
var errMoved = errors.New("the session moved on meanwhile")

// startOnCandidates calls start on hosts[0], where session id is already placed in state
// status. When that host refuses the sandbox before touching the session (full, cordoned,
// draining, unreachable: hostclient.Refused), the session is placed on the next candidate and
// start is called there, again with replaced set, and so on. It answers with the host that took
// the sandbox and its client. When every candidate refuses, the session goes to giveUp (failed
// for a new session, lost for a resume, which Resume retries) and the answer is unavailable, or
// resource_exhausted when every host answered that.
func startOnCandidates[T any](ctx context.Context, s *Service, id string, status, giveUp sessiondb.Status, hosts []*fleet.Host,
	start func(c hostv1connect.HostServiceClient, replaced bool) (T, error)) (T, *fleet.Host, hostv1connect.HostServiceClient, error) {
	var zero T
	var refusals []string
	// exhausted stays true while every host answers resource_exhausted: then the answer says so
	// too, since what no host can take (an image over the size limit, a fleet that is full) is
	// the caller's to change, not a moment to wait out.
	exhausted := true
	for i, h := range hosts {
		if i > 0 {
			prev := hosts[i-1]
			_, _, err := s.store.Move(ctx, id, status, fmt.Sprintf("placed on %s: %s refused", h.ID, prev.ID), func(r *sessiondb.Record) error {
				if r.HostID != prev.ID {
					return errMoved
				}
				r.HostID, r.SandboxID = h.ID, ""
				return nil
			})
			if err != nil {
				return zero, nil, nil, fmt.Errorf("place session %s on %s after %s: %w", id, h.ID, strings.Join(refusals, "; "), err)
			}
		}
		client := s.d.Hosts.Client(h.Address)
		out, err := start(client, i > 0)
		if err == nil {
			return out, h, client, nil
		}
		if !hostclient.Refused(err) {
			return zero, nil, nil, err
		}
		refusals = append(refusals, connect.CodeOf(err).String()+" from "+h.ID+": "+connectMessage(err))
		exhausted = exhausted && connect.CodeOf(err) == connect.CodeResourceExhausted
	}
	why := "every sandbox host with room refused it: " + strings.Join(refusals, "; ")
	if _, _, err := s.store.Move(context.WithoutCancel(ctx), id, giveUp, why, nil); err != nil {
		var me *sessiondb.MoveError
		if !errors.As(err, &me) {
			return zero, nil, nil, err
		}
	}
	if exhausted {
		return zero, nil, nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("session %s: %s", id, why))
	}
	return zero, nil, nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("session %s: %s; retry later", id, why))
}

// connectMessage is err's message without its code.
func connectMessage(err error) string {
	if ce := new(connect.Error); errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}
