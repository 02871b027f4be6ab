package webhooks

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/platform/pubsub"
)

// benchPayload is a GitHub pull_request delivery of a typical size (about 16 KiB).
func benchPayload(b *testing.B) []byte {
	body, err := json.Marshal(map[string]any{
		"action": "opened", "number": 7,
		"pull_request": map[string]any{"title": "Fix it", "body": strings.Repeat("A line of description. ", 700)},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// benchClient keeps a connection per parallel sender: the default client keeps two.
var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// runBoth runs op serially and from many goroutines, reporting deliveries/s for each.
func runBoth(b *testing.B, op func(b *testing.B)) {
	b.Run("serial", func(b *testing.B) {
		n := 0
		for b.Loop() {
			op(b)
			n++
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "deliveries/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(b)
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
	})
}

// BenchmarkWebhookToPublished posts signed GitHub deliveries to the inbound route over loopback
// HTTP; each answer (202) comes after the emulator acknowledged the publish.
func BenchmarkWebhookToPublished(b *testing.B) {
	s, _ := newService(b, limits())
	reg := create(b, s, alice, "github", proto.String(secret)).GetRegistration()
	u := serve(b, s) + reg.GetUrlPath()
	body := benchPayload(b)
	header := gitHubHeader("pull_request", string(body))
	runBoth(b, func(b *testing.B) {
		req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header = header.Clone()
		resp, err := benchClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("status %d", resp.StatusCode)
		}
	})
}

// BenchmarkRawPublish is the baseline: the same delivery published straight to the emulator,
// with no HTTP, signature, registration or encoding.
func BenchmarkRawPublish(b *testing.B) {
	s, _ := newService(b, limits())
	body := benchPayload(b)
	d := triggers.Delivery{
		RegistrationID: "hook_bench", Provider: "github", EventKey: "github.pull_request.opened",
		DeliveryKey: delivery1, Payload: body, ReceivedAt: t0,
	}
	data, err := d.Encode()
	if err != nil {
		b.Fatal(err)
	}
	attrs := d.Attributes()
	runBoth(b, func(b *testing.B) {
		if _, err := s.pubsub.Publish(b.Context(), pubsub.TopicAutomationEvents, data, attrs); err != nil {
			b.Fatal(err)
		}
	})
}
