package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// genericDelivery posts body to a generic registration with header set (name, value pairs).
func (as *automationStack) genericDelivery(t testing.TB, path, body string, header ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, as.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// registration makes a registration of provider and an enabled automation on eventKey (where
// "<id>" stands for the registration's id) that calls the upstream; it answers the
// registration's path and secret and the automation's id.
func (as *automationStack) registration(t *testing.T, provider, eventKey string) (path, secret, automationID string) {
	t.Helper()
	reg, err := as.webhooks.CreateWebhookRegistration(t.Context(), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "replays", Provider: provider}))
	if err != nil {
		t.Fatal(err)
	}
	eventKey = strings.ReplaceAll(eventKey, "<id>", reg.Msg.GetRegistration().GetId())
	automationID = as.create(t, `{"version":1,
		"entrypoints":[{"id":"on","type":"event","event_key":"`+eventKey+`"}],
		"blocks":[{"id":"send","type":"http","method":"POST","url":"`+as.upstream.URL+`/hook","body":{"n":"1"}}]}`)
	return reg.Msg.GetRegistration().GetUrlPath(), reg.Msg.GetSecret(), automationID
}

// runsAndDuplicates waits until the automation has at least wantDrops duplicate drops and
// wantRuns runs, then answers its runs.
func (as *automationStack) runsAndDuplicates(t *testing.T, automationID string, wantDrops, wantRuns int) []*appv1.AutomationRunBrief {
	t.Helper()
	var runs []*appv1.AutomationRunBrief
	testkit.Eventually(t, 30*time.Second, "the deliveries turning into one run", func() (bool, string) {
		drops, err := as.runs.ListRecentDrops(t.Context(), connect.NewRequest(&appv1.ListRecentDropsRequest{AutomationId: automationID}))
		if err != nil {
			t.Fatal(err)
		}
		list, err := as.runs.ListRuns(t.Context(), connect.NewRequest(&appv1.ListRunsRequest{AutomationId: automationID}))
		if err != nil {
			t.Fatal(err)
		}
		runs = list.Msg.GetRuns()
		for _, d := range drops.Msg.GetDrops() {
			if d.GetReason() != "duplicate" {
				t.Fatalf("drop %v, want only duplicates", d)
			}
		}
		return len(drops.Msg.GetDrops()) >= wantDrops && len(runs) >= wantRuns, fmt.Sprintf("%d runs, %d drops", len(runs), len(drops.Msg.GetDrops()))
	})
	return runs
}

func TestSecurityACapturedGenericDeliveryReplayedWithNewIdempotencyKeysStartsNoNewRun(t *testing.T) {
	as := newAutomationStack(t)
	path, secret, id := as.registration(t, "webhook", "webhook.<id>")
	body := `{"build":"green"}`
	captured := httpapi.Sign([]byte(secret), time.Now(), []byte(body))
	if code := as.genericDelivery(t, path, body, httpapi.SignatureHeader, captured, "Idempotency-Key", "first"); code != http.StatusAccepted {
		t.Fatalf("the sender's delivery answered %d", code)
	}
	// The attacker replays the captured request with fresh unsigned ids.
	for _, fresh := range []string{"replay-1", "replay-2"} {
		if code := as.genericDelivery(t, path, body, httpapi.SignatureHeader, captured, "Idempotency-Key", fresh, "X-Delivery-Id", fresh); code != http.StatusAccepted {
			t.Fatalf("replay %s answered %d, want 202 (accepted, then dropped as a duplicate)", fresh, code)
		}
	}
	if runs := as.runsAndDuplicates(t, id, 2, 1); len(runs) != 1 {
		t.Fatalf("runs %v, want one", runs)
	}
}

func TestSecurityAGenericDeliveryWithAnOldOrBodyOnlySignatureIsRefused(t *testing.T) {
	as := newAutomationStack(t)
	path, secret, _ := as.registration(t, "webhook", "webhook.<id>")
	body := `{"build":"green"}`
	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"captured ten minutes ago", []string{httpapi.SignatureHeader, httpapi.Sign([]byte(secret), time.Now().Add(-10*time.Minute), []byte(body))}},
		{"signed the old body-only way", []string{httpapi.GitHubSignatureHeader, sign(secret, body)}},
	} {
		if code := as.genericDelivery(t, path, body, tc.header...); code != http.StatusUnauthorized {
			t.Errorf("%s: answered %d, want 401", tc.name, code)
		}
	}
}

func TestSecurityAGitHubBodyReplayedWithNewDeliveryIDsStartsNoNewRun(t *testing.T) {
	as := newAutomationStack(t)
	path, secret, id := as.registration(t, "github", "github.push")
	body := `{"ref":"refs/heads/main","after":"4b825dc6"}`
	if code := as.signedDelivery(t, path, secret, "push", "guid-1", body); code != http.StatusAccepted {
		t.Fatalf("GitHub's delivery answered %d", code)
	}
	// Captured, then replayed once it ran (the worker takes deliveries in no set order, so
	// replays sent at once could be the one that runs, which would still be one run).
	as.runsAndDuplicates(t, id, 0, 1)
	for _, guid := range []string{"guid-forged-1", "guid-forged-2"} {
		if code := as.signedDelivery(t, path, secret, "push", guid, body); code != http.StatusAccepted {
			t.Fatalf("replay %s answered %d, want 202 (accepted, then dropped as a duplicate)", guid, code)
		}
	}
	runs := as.runsAndDuplicates(t, id, 2, 1)
	if len(runs) != 1 || runs[0].GetDeliveryKey() != "guid-1" {
		t.Fatalf("runs %v, want one, of guid-1", runs)
	}
}
