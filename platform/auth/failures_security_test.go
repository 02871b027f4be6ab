package auth_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
)

// The attack: failures were limited per address (30, then one a second), so one client behind
// a NAT presenting bad keys (a stale key retried, a script guessing) had every other person
// behind that address refused with resource_exhausted, valid keys included, for as long as it
// kept failing. Now one key id from one address is what runs out quickly; the address alone
// has a looser cap, which still stops one client guessing ever new key ids. The clock stands
// still: no failure is refilled during the test.
func TestSecurityOneClientsBadKeysDoNotLockOutOthersBehindItsAddress(t *testing.T) {
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	// A logger of its own: the key checks' last-use writes may outlive the test (and warn).
	authn := auth.NewAuthenticator(db, clk, time.Minute, slog.New(slog.DiscardHandler))
	keys := auth.NewKeys(db, authn)
	const nat, elsewhere, target = "198.51.100.7", "198.51.100.8", "bbbbbbbbbbbb"
	valid := func(name string) string {
		_, key, err := keys.Create(t.Context(), auth.NewKeyInput{Name: name, Kind: auth.KindPersonal, UserID: "user_" + name}, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	// code is the answer's Connect code, 0 when the key verified.
	code := func(key, client string) connect.Code {
		if _, err := authn.Authenticate(t.Context(), key, client); err != nil {
			return connect.CodeOf(err)
		}
		return 0
	}

	// Wrong secrets for one key id from the NAT's address: the burst, then refused.
	for n := range 30 {
		if got := code(guessFor(target, fmt.Sprint("secret", n)), nat); got != connect.CodeUnauthenticated {
			t.Fatalf("wrong secret %d for one key id: %v, want unauthenticated", n, got)
		}
	}
	if got := code(guessFor(target, "one more"), nat); got != connect.CodeResourceExhausted {
		t.Fatalf("the 31st wrong secret for one key id from one address: %v, want resource_exhausted", got)
	}
	// Someone else behind the same address, with a valid key, is not refused; nor is the same
	// key id from another address.
	if got := code(valid("neighbour"), nat); got != 0 {
		t.Fatalf("a valid key behind the same address after another's failures: %v", got)
	}
	if got := code(guessFor(target, "from elsewhere"), elsewhere); got != connect.CodeUnauthenticated {
		t.Fatalf("the throttled key id from another address: %v, want unauthenticated", got)
	}

	// Ever new key ids from the address run into its own cap (300 with the 30 above), after
	// which uncached keys from it, valid ones too, wait.
	refusedAfter := -1
	for n := range 300 {
		if got := code(guess(fmt.Sprint("spray", n)), nat); got == connect.CodeResourceExhausted {
			refusedAfter = n
			break
		} else if got != connect.CodeUnauthenticated {
			t.Fatalf("new key id %d: %v", n, got)
		}
	}
	if refusedAfter != 270 {
		t.Fatalf("the address was refused after %d new key ids, want 270 (its cap of 300 less the 30 above)", refusedAfter)
	}
	if got := code(valid("late"), nat); got != connect.CodeResourceExhausted {
		t.Fatalf("a new valid key from an address past its cap: %v, want resource_exhausted", got)
	}
	if got := code(valid("other"), elsewhere); got != 0 {
		t.Fatalf("a valid key from another address: %v", got)
	}
}
