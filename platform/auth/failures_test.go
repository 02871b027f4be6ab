package auth

import (
	"net/http"
	"testing"
	"time"
)

// The failure limit itself is shared across instances: see TestFailureLimitsAreSharedAcrossInstances.
func TestFailuresRememberBadKeysForTheirTTL(t *testing.T) {
	var f failures
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if f.known("h", now) {
		t.Fatal("a fresh tracker refuses")
	}
	f.remember("h", now)
	if !f.known("h", now) || f.known("h", now.Add(badKeyTTL)) {
		t.Fatal("a bad key is not remembered for badKeyTTL exactly")
	}
}

func TestFailuresStayBounded(t *testing.T) {
	var f failures
	now := time.Now()
	for i := range maxTracked + 10 {
		f.remember(string(rune(i)), now)
	}
	if len(f.bad) > maxTracked {
		t.Fatalf("tracking %d bad keys", len(f.bad))
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
