package host

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// netUsage is a session's running network totals: what its earlier sandboxes counted (from
// its log, where each reported its totals) plus what the proxy counts for this one. The totals
// are logged as a net.usage event, at most once per housekeeping round and only when they
// changed, and once more as the sandbox goes, so the log's last one is the session's.
type netUsage struct {
	mu sync.Mutex
	// base is the session's totals when this sandbox started.
	base httpapi.NetworkTotals
	// reported is what the last net.usage event said.
	reported httpapi.NetworkTotals
}

// reportNetUsage logs the session's totals when they changed since they were last logged.
func (b *box) reportNetUsage() {
	if b.net == nil || b.events == nil {
		return
	}
	b.usage.mu.Lock()
	defer b.usage.mu.Unlock()
	now := b.usage.base.Plus(b.net.Counters.Usage())
	if now == b.usage.reported {
		return
	}
	b.usage.reported = now
	b.emit(eventlog.KindNetUsage, now)
}

// lastNetUsage is the totals a session's log last reported: where a resumed session's counting
// goes on. Traffic after that report, on a host that died before its next one, is not counted.
func lastNetUsage(ctx context.Context, log *eventlog.Reader, session string) (httpapi.NetworkTotals, error) {
	var u httpapi.NetworkTotals
	e, ok, err := log.Last(ctx, session, eventlog.KindNetUsage)
	if err != nil || !ok {
		return u, err
	}
	if err := json.Unmarshal([]byte(e.PayloadJSON), &u); err != nil {
		return u, fmt.Errorf("the last %s event of %s: %w", eventlog.KindNetUsage, session, err)
	}
	return u, nil
}
