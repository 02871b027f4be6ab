package webhooks

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// FuzzInboundDelivery replays what anyone on the internet may post to a registration's URL:
// any body, signature, event, delivery id and content type, signed with the right secret or
// not. Only a delivery carrying the right signature is accepted (GitHub's over the body,
// the generic one over "<t>.<body>"); a refusal is a 4xx naming what is wrong; and a delivery
// that passes encodes and decodes to itself, so the worker never receives a message it cannot
// read.
func FuzzInboundDelivery(f *testing.F) {
	for _, seed := range []struct {
		github                      bool
		signRight                   bool
		sig, event, id, ctype, body string
	}{
		{true, true, "", "pull_request", "guid-1", "application/json", `{"action":"opened","number":7,"repository":{"full_name":"acme/widgets"}}`},
		{true, true, "", "push", "guid-2", "application/x-www-form-urlencoded", `payload=%7B%22ref%22%3A%22refs%2Fheads%2Fmain%22%7D`},
		{true, false, "sha256=00", "ping", "guid-3", "", `{}`},
		{true, true, "", "", "guid-4", "", `{}`},
		{true, true, "", "issues", "", "", `{"action":"opened"}`},
		{true, true, "", "issues", "a b", "", `{"action":"opened"}`},
		{false, true, "", "", "", "", `{"hello":"world"}`},
		{false, true, "", "", "key-1", "", `[1,2]`},
		{false, false, "sha1=abc", "", "", "", `{}`},
		{false, false, "t=1700000000,v1=zz", "", "", "", `{}`},
		{false, false, "t=1,v1=00,v1=11", "", "", "", `{}`},
		{false, true, "", "", "", "", "{\"a\":\"\xff\"}"},
		{false, true, "", "", "", "", `{"a":1} {"b":2}`},
	} {
		f.Add(seed.github, seed.signRight, seed.sig, seed.event, seed.id, seed.ctype, []byte(seed.body))
	}
	secret := []byte("whsec_fuzz-secret-of-some-length")
	now := time.Unix(1_700_000_000, 0)
	svc := &Service{lim: config.Default().Limits.Webhooks}
	f.Fuzz(func(t *testing.T, github, signRight bool, sig, event, id, ctype string, body []byte) {
		reg := &registration{id: "hook_fuzz", provider: triggers.ProviderWebhook, secret: secret}
		header, right := httpapi.SignatureHeader, httpapi.Sign(secret, now, body)
		rightSum := right[strings.Index(right, "v1=")+len("v1="):]
		if github {
			reg.provider, header = triggers.ProviderGitHub, httpapi.GitHubSignatureHeader
			rightSum = hex.EncodeToString(httpapi.SignatureSum(secret, body))
			right = "sha256=" + rightSum
		}
		if signRight {
			sig = right
		}
		h := http.Header{}
		h.Set(header, sig)
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", id)
		h.Set("Idempotency-Key", id)
		h.Set("Content-Type", ctype)

		d, err := svc.verified(reg, h, body, now)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if !strings.Contains(strings.ToLower(sig), rightSum) {
			t.Fatalf("accepted signature %q for a body whose signature is %q", sig, right)
		}
		data, err := d.Encode()
		if err != nil {
			t.Fatalf("a delivery the route accepted does not encode: %v (%+v)", err, d)
		}
		back, err := triggers.Decode(data)
		if err != nil {
			t.Fatalf("a delivery the route accepted does not decode: %v (%s)", err, data)
		}
		if back.DeliveryKey != d.DeliveryKey || back.EventKey != d.EventKey || !bytes.Equal(back.Payload, d.Payload) {
			t.Fatalf("delivery %+v came back as %+v", d, back)
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var r *refusal
	if !errors.As(err, &r) || r.status < 400 || r.status > 499 {
		t.Fatalf("error %v, want a 4xx refusal", err)
	}
}
