package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// webhookBench is an automation listening for GitHub pull requests behind a registration.
type webhookBench struct {
	as                    *automationStack
	automation, path, key string
	runs                  *runs.Store
}

func newWebhookBench(b *testing.B) *webhookBench {
	as := newAutomationStack(b)
	id := as.create(b, `{"version":1,
		"entrypoints":[{"id":"opened","type":"event","event_key":"github.pull_request.opened","filter":"event.pull_request.draft == false"}],
		"blocks":[{"id":"check","type":"filter","condition":"event.number > 0"}]}`)
	if _, err := as.automations.UpdateAutomationMeta(b.Context(), connect.NewRequest(&appv1.UpdateAutomationMetaRequest{
		Id: id, SettingsJson: ptr(`{"concurrency_limit":100}`),
	})); err != nil {
		b.Fatal(err)
	}
	reg, err := as.webhooks.CreateWebhookRegistration(b.Context(), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "bench", Provider: "github"}))
	if err != nil {
		b.Fatal(err)
	}
	return &webhookBench{as: as, automation: id, path: reg.Msg.GetRegistration().GetUrlPath(), key: reg.Msg.GetSecret(), runs: runs.NewStore(as.db, time.Now)}
}

// benchPR is the body of pull request n: each delivery its own, as GitHub's are (the same body
// under another delivery id within the dedupe window is dropped as a replay).
func benchPR(n int64) string {
	return fmt.Sprintf(`{"action":"opened","number":%d,"pull_request":{"draft":false},"repository":{"full_name":"acme/widgets"}}`, n)
}

// waitRunStarted polls the run a delivery makes (its id is derived from the delivery) until it
// exists.
func (w *webhookBench) waitRunStarted(b *testing.B, guid string) {
	id := runner.RunID(w.automation, guid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := w.runs.Get(b.Context(), id); err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no run for delivery %s after 30s", guid)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkWebhookToRunStarted is one signed GitHub delivery through the inbound route, Pub/Sub
// and the worker until its run exists.
func BenchmarkWebhookToRunStarted(b *testing.B) {
	w := newWebhookBench(b)
	var n int64
	for b.Loop() {
		n++
		guid := fmt.Sprintf("bench-%d", n)
		if code := w.as.signedDelivery(b, w.path, w.key, "pull_request", guid, benchPR(n)); code != http.StatusAccepted {
			b.Fatalf("delivery answered %d", code)
		}
		w.waitRunStarted(b, guid)
	}
}

// BenchmarkWebhookDeliveriesSustained sends deliveries from 16 senders, each delivery twice,
// and reports the time per delivery until every one has exactly one run.
func BenchmarkWebhookDeliveriesSustained(b *testing.B) {
	w := newWebhookBench(b)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				guid := fmt.Sprintf("sustained-%d", i)
				for range 2 {
					if code := w.as.signedDelivery(b, w.path, w.key, "pull_request", guid, benchPR(i)); code != http.StatusAccepted {
						b.Errorf("delivery answered %d", code)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := 1; i <= b.N; i++ {
		w.waitRunStarted(b, fmt.Sprintf("sustained-%d", i))
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
	list, err := w.runs.List(b.Context(), runs.ListQuery{AutomationID: w.automation, Limit: b.N + 10})
	if err != nil {
		b.Fatal(err)
	}
	if len(list) != b.N {
		b.Fatalf("%d runs for %d deliveries sent twice each", len(list), b.N)
	}
}
