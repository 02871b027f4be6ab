package auth_test

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
)

// guess is a well-formed key that exists nowhere, with its own key id, made from seed.
func guess(seed string) string {
	return "hgr_" + encoded("id" + seed)[:12] + "_" + encoded(seed)[:32]
}

// guessFor is a well-formed key of key id id whose secret, made from seed, is wrong.
func guessFor(id, seed string) string { return "hgr_" + id + "_" + encoded(seed)[:32] }

// encoded is seed's SHA-256 in the keys' alphabet (lower-case base32).
func encoded(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
}

// Two instances (two authenticators over one database) share the failure limit of a key id
// from a client address: after its burst of wrong secrets on one, the other lets at most one
// more through (whose failure tells it) and then refuses it too, while the same key id from
// another address is untouched. A second later one more failure is allowed on both.
func TestFailureLimitsAreSharedAcrossInstances(t *testing.T) {
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	a := auth.NewAuthenticator(db, clk, time.Minute, nil)
	b := auth.NewAuthenticator(db, clk, time.Minute, nil)
	const attacker, id = "203.0.113.9", "aaaaaaaaaaaa"
	var failed int
	for n := 0; ; n++ {
		_, err := a.Authenticate(t.Context(), guessFor(id, fmt.Sprint("a", n)), attacker)
		if connect.CodeOf(err) == connect.CodeResourceExhausted {
			break
		}
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("guess %d: %v", n, err)
		}
		failed++
	}
	if failed != 30 {
		t.Fatalf("instance a counted %d failures before refusing, want the burst of 30", failed)
	}
	try := func(inst *auth.Authenticator, client string, n int) connect.Code {
		_, err := inst.Authenticate(t.Context(), guessFor(id, fmt.Sprint("b", n)), client)
		return connect.CodeOf(err)
	}
	if got := try(b, attacker, 0); got != connect.CodeUnauthenticated {
		t.Fatalf("b's first guess from the address: %v (it cannot know yet)", got)
	}
	if got := try(b, attacker, 1); got != connect.CodeResourceExhausted {
		t.Fatalf("b's second guess from the address: %v, want resource_exhausted", got)
	}
	if got := try(b, "203.0.113.10", 2); got != connect.CodeUnauthenticated {
		t.Fatalf("another address on b: %v", got)
	}
	clk.Advance(time.Second)
	if got := try(a, attacker, 3); got != connect.CodeUnauthenticated {
		t.Fatalf("a second later on a: %v", got)
	}
}
