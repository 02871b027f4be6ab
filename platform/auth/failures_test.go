package auth

import (
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
)

func TestFailuresRememberBadKeysAndRunOutPerClientAndKeyID(t *testing.T) {
	var f failures
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if f.known("h", now) || f.exhausted("10.0.0.1", "keyid", now) != nil {
		t.Fatal("a fresh tracker refuses")
	}
	f.failed("h", "10.0.0.1", "keyid", now)
	if !f.known("h", now) || f.known("h", now.Add(badKeyTTL)) {
		t.Fatal("a bad key is not remembered for badKeyTTL exactly")
	}
	for i := 1; i < failureBurst; i++ {
		f.failed("other", "10.0.0.1", "keyid", now)
	}
	for _, tc := range []struct {
		name, client, keyID string
		exhausted           bool
	}{
		{"the same client and key id", "10.0.0.1", "keyid", true},
		{"the same client, another key id", "10.0.0.1", "other", true},
		{"another client, the same key id", "10.0.0.2", "keyid", true},
		{"another client and key id", "10.0.0.2", "other", false},
	} {
		err := f.exhausted(tc.client, tc.keyID, now)
		if tc.exhausted != (connect.CodeOf(err) == connect.CodeResourceExhausted) {
			t.Errorf("%s: exhausted = %v", tc.name, err)
		}
	}
	if err := f.exhausted("10.0.0.1", "keyid", now.Add(time.Second)); err != nil {
		t.Fatalf("a second later one more failure is allowed: %v", err)
	}
}

func TestFailuresStayBounded(t *testing.T) {
	var f failures
	now := time.Now()
	for i := range maxTracked + 10 {
		f.failed(string(rune(i)), "client", string(rune(i)), now)
	}
	if len(f.bad) > maxTracked || len(f.limiters) > maxTracked {
		t.Fatalf("tracking %d bad keys and %d limiters", len(f.bad), len(f.limiters))
	}
}

func TestClientAddressTrustsTheProxysHopOnlyBehindOne(t *testing.T) {
	h := http.Header{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7"}}
	if got := clientAddress("10.1.2.3:4567", h, true); got != "203.0.113.7" {
		t.Errorf("behind a proxy: %q", got)
	}
	if got := clientAddress("10.1.2.3:4567", h, false); got != "10.1.2.3" {
		t.Errorf("not behind a proxy: %q", got)
	}
}
