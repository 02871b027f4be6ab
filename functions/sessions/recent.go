package sessions

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// recentTTL is how long a session record read for a sandbox call is reused by the next ones.
// Exec and ReadFile come in bursts, and their Firestore read is a fifth of an exec's round trip.
// A stale record is safe: the host is the authority on whether it holds the session's sandbox,
// answers failed_precondition when it does not, and the call is then retried on a fresh read.
const recentTTL = time.Second

// recentMax bounds the cache; past it, it starts over.
const recentMax = 10_000

// recent keeps session records read within recentTTL, by record id, and which record each
// caller's name for a session (ids.go) resolved to.
type recent struct {
	mu    sync.Mutex
	m     map[string]recentRecord
	names map[recentName]string
}

type recentName struct{ caller, id string }

type recentRecord struct {
	rec *sessiondb.Record
	at  time.Time
}

// get is the record caller's name id resolved to within recentTTL, or nil.
func (r *recent) get(caller, id string) *sessiondb.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[r.names[recentName{caller, id}]]; ok && time.Since(e.at) < recentTTL {
		return e.rec
	}
	return nil
}

// put keeps rec, which caller named id ("" for a record read by its record id).
func (r *recent) put(caller, id string, rec *sessiondb.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= recentMax || len(r.names) >= recentMax {
		r.m, r.names = make(map[string]recentRecord), make(map[recentName]string)
	}
	r.m[rec.ID] = recentRecord{rec: rec, at: time.Now()}
	if id != "" {
		r.names[recentName{caller, id}] = rec.ID
	}
}

func (r *recent) drop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// loadRecent is load that may answer from the recent cache; cached says it did.
func (s *Service) loadRecent(ctx context.Context, id string) (rec *sessiondb.Record, cached bool, err error) {
	caller, _ := auth.Caller(ctx)
	if rec := s.recent.get(caller.UserID, id); rec != nil {
		return rec, true, nil
	}
	if rec, err = s.load(ctx, id); err != nil {
		return nil, false, err
	}
	s.recent.put(caller.UserID, id, rec)
	return rec, false, nil
}

// proxyStream runs a server-streaming call on the session's host and passes its messages to
// out. The session record may come from the recent cache; when the host refuses the call as
// failed_precondition (it holds no sandbox for the session any more) before anything was sent,
// the record is read afresh and the call made once more.
func proxyStream[Res any](ctx context.Context, s *Service, id string, wake bool, out *connect.ServerStream[Res],
	call func(hostv1connect.HostServiceClient, *sessiondb.Record) (*connect.ServerStreamForClient[Res], error)) error {
	rec, cached, err := s.loadRecent(ctx, id)
	if err != nil {
		return err
	}
	caller, _ := auth.Caller(ctx)
	for {
		sent, err := streamOnce(ctx, s, rec, wake, out, call)
		if !cached || sent || connect.CodeOf(err) != connect.CodeFailedPrecondition {
			return err
		}
		s.recent.drop(rec.ID)
		if rec, err = s.load(ctx, id); err != nil {
			return err
		}
		s.recent.put(caller.UserID, id, rec)
		cached = false
	}
}

func streamOnce[Res any](ctx context.Context, s *Service, rec *sessiondb.Record, wake bool, out *connect.ServerStream[Res],
	call func(hostv1connect.HostServiceClient, *sessiondb.Record) (*connect.ServerStreamForClient[Res], error)) (bool, error) {
	client, err := s.host(ctx, rec, wake)
	if err != nil {
		return false, err
	}
	up, err := call(client, rec)
	if err != nil {
		return false, err
	}
	return pipe(up, out)
}

// pipe forwards a host's server stream to the caller and says whether it forwarded anything.
func pipe[T any](up *connect.ServerStreamForClient[T], down *connect.ServerStream[T]) (bool, error) {
	defer up.Close()
	sent := false
	for up.Receive() {
		if err := down.Send(up.Msg()); err != nil {
			return true, err
		}
		sent = true
	}
	return sent, up.Err()
}
