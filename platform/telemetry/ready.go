package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Check is one dependency a readiness probe waits for: nil when it is reachable.
type Check func(context.Context) error

// readyTimeout bounds one probe: a probe that hangs is as unready as one that fails.
const readyTimeout = 5 * time.Second

// Ready serves /readyz: 200 "ok" when every check passes, else 503 naming each failing check,
// one a line (its error is logged, not sent: probes may come from anywhere). Checks run at once, each bounded by readyTimeout.
// /healthz stays a plain liveness answer, so a slow dependency never gets a live process killed.
func Ready(log *slog.Logger, checks map[string]Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		var mu sync.Mutex
		var failed []string
		var wg sync.WaitGroup
		for name, check := range checks {
			wg.Go(func() {
				if err := check(ctx); err != nil {
					log.WarnContext(ctx, "not ready", "check", name, "err", err)
					mu.Lock()
					failed = append(failed, name)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if len(failed) > 0 {
			sort.Strings(failed)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(strings.Join(failed, "\n") + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}
