package sessions

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// How session ids work. A session's record id (sessiondb.Record.ID) is never chosen by a user:
// it is minted, or derived with the deployment's secret from the owner and a key (the
// requested_session_id, or the task a session runs for), so that no user can take an id another
// user's session or automation will need, nor compute one from what they can read. A requested
// id is an alias only its owner can use: the owner names and sees the session by it, everyone
// else (admins) by its record id. Every call resolves the id it is given with candidates.

// keyPurpose names the secret session ids derive from (seal.Sealer.Derive).
const keyPurpose = "session ids"

// Key spaces of derived session ids, so that a requested id and a task's key never meet.
const (
	spaceRequested = "requested"
	spaceTask      = "task"
)

// derivedID is the record id of owner's session for key in space.
func (s *Service) derivedID(owner, space, key string) string {
	return s.keyer.FromKey("sess", owner+"\x00"+space+"\x00"+key)
}

// candidates are the record ids a session id named by caller may stand for, in the order to try
// them: the caller's own requested id, and the id as a record id (a minted id, an id an admin
// sees, or a session made before requested ids were scoped per owner, whose record id is the id
// it requested). A minted-looking id is tried as itself first, as that is what it almost always
// is; any other as the caller's requested id first, so no record can shadow the caller's own.
func (s *Service) candidates(caller auth.Principal, id string) []string {
	if !requestedID.MatchString(id) {
		return []string{id}
	}
	mine := s.derivedID(caller.UserID, spaceRequested, id)
	if ids.Valid("sess", id) {
		return []string{id, mine}
	}
	return []string{mine, id}
}

// resolve reads the session id names for the caller, deleted or not: the first candidate that
// exists and that the caller may see. Anything else is not_found naming id as given, so that
// whether another user has a session by that name (or any record id) is not revealed.
func (s *Service) resolve(ctx context.Context, field, id string) (*sessiondb.Record, error) {
	if err := ids.Check(field, id); err != nil {
		return nil, err
	}
	caller, _ := auth.Caller(ctx)
	for _, c := range s.candidates(caller, id) {
		rec, err := s.store.Get(ctx, c)
		if errors.Is(err, sessiondb.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if visible(caller, rec) {
			return rec, nil
		}
	}
	return nil, apierr.NotFound("session", id)
}

// visible reports whether the caller may see rec: its owner and admins may.
func visible(caller auth.Principal, rec *sessiondb.Record) bool {
	return rec.Owner == caller.UserID || caller.Admin
}

// shownID is the id the caller sees rec by: its requested id for its owner, its record id for
// anyone else (who could not use the requested id).
func shownID(ctx context.Context, rec *sessiondb.Record) string {
	caller, _ := auth.Caller(ctx)
	if rec.RequestedID != "" && rec.Owner == caller.UserID {
		return rec.RequestedID
	}
	return rec.ID
}

// toHost readies a caller's request for the session's host, which knows the session by its
// record id, not by the id the caller named it with.
func toHost[M any, P interface {
	*M
	proto.Message
}](msg P, rec *sessiondb.Record) *connect.Request[M] {
	setSessionID(msg, rec.ID)
	return connect.NewRequest((*M)(msg))
}

// fromHost passes a host's answer on with its session_id the one the caller sees.
func fromHost[M any, P interface {
	*M
	proto.Message
}](ctx context.Context, rec *sessiondb.Record, resp *connect.Response[M], err error) (*connect.Response[M], error) {
	if err != nil {
		return nil, err
	}
	setSessionID(P(resp.Msg), shownID(ctx, rec))
	return resp, nil
}

// setSessionID sets msg's session_id field, when it has one.
func setSessionID(msg proto.Message, id string) {
	m := msg.ProtoReflect()
	if f := m.Descriptor().Fields().ByName("session_id"); f != nil && f.Kind() == protoreflect.StringKind {
		m.Set(f, protoreflect.ValueOfString(id))
	}
}
