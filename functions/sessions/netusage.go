package sessions

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
)

// NetworkUsagePath is the plain HTTP route of a session's network totals through the egress
// proxy: the running totals its host last logged as a net.usage event. It is a route beside
// the Session message, as container platforms keep a container's stats apart from its
// description, because Session's fields are the API's fixed contract.
const NetworkUsagePath = "/api/v1/sessions/{id}/network-usage"

// NetworkUsage is what NetworkUsagePath answers: the session's totals since it was created,
// across every sandbox it had, as of the net.usage event at EventIdx (0 and no AsOf when the
// session has made no connection yet).
type NetworkUsage struct {
	SessionID string `json:"session_id"`
	egressproxy.Usage
	AsOf     string `json:"as_of,omitempty"`
	EventIdx int64  `json:"event_idx"`
}

// NetworkUsage serves GET NetworkUsagePath; it authenticates and finds the session like every
// route, and reads only the session's log, so it answers for an evicted or lost session too.
func (s *Service) NetworkUsage(authn *auth.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, rec, ok := s.routeSession(authn, w, r, auth.Read)
		if !ok {
			return
		}
		e, ok, err := s.events.Last(ctx, rec.ID, eventlog.KindNetUsage)
		if err != nil {
			writeErr(w, r, err)
			return
		}
		out := NetworkUsage{SessionID: shownID(ctx, rec)}
		if ok {
			if err := json.Unmarshal([]byte(e.PayloadJSON), &out.Usage); err != nil {
				writeErr(w, r, err)
				return
			}
			out.AsOf, out.EventIdx = e.At.UTC().Format(time.RFC3339Nano), e.Idx
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(out)
	})
}
