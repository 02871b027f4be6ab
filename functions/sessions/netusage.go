package sessions

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// NetworkUsage serves GET httpapi.NetworkUsagePath (httpapi.NetworkUsage); it authenticates and
// finds the session like every route, and reads only the session's log, so it answers for an
// evicted or lost session too.
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
		out := httpapi.NetworkUsage{SessionID: shownID(ctx, rec)}
		if ok {
			if err := json.Unmarshal([]byte(e.PayloadJSON), &out.NetworkTotals); err != nil {
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
