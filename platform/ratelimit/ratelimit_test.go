package ratelimit_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/ratelimit"
)

func TestMain(m *testing.M) { os.Exit(testenv.MainCheckingIndexes(m)) }

// Two instances sharing one limit (the same kind over the same database) let through its burst
// between them, not each: Take on either sees what the other spent. Time refills it at the
// rate, for both.
func TestTwoInstancesShareOneLimit(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	a := ratelimit.New(db, "test.take", 4, time.Minute, clk.Now)
	b := ratelimit.New(db, "test.take", 4, time.Minute, clk.Now)
	var taken int
	for i := range 10 {
		inst := a
		if i%2 == 1 {
			inst = b
		}
		ok, err := inst.Take(t.Context(), "address:192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			taken++
		}
	}
	if taken != 4 {
		t.Fatalf("two instances took %d events of a burst of 4", taken)
	}
	// Another name has its own bucket.
	if ok, err := b.Take(t.Context(), "address:192.0.2.2"); err != nil || !ok {
		t.Fatalf("another address: %v, %v", ok, err)
	}
	// Both know now, without asking.
	for _, inst := range []*ratelimit.Limit{a, b} {
		if ok, wait := inst.Allowed("address:192.0.2.1"); ok || wait <= 0 {
			t.Fatalf("Allowed after the burst: %v, wait %v", ok, wait)
		}
	}
	clk.Advance(time.Minute)
	if ok, err := b.Take(t.Context(), "address:192.0.2.1"); err != nil || !ok {
		t.Fatalf("a minute later: %v, %v", ok, err)
	}
	if ok, err := a.Take(t.Context(), "address:192.0.2.1"); err != nil || ok {
		t.Fatalf("a second event in that minute: %v, %v", ok, err)
	}
}

// Failures are spent on every name at once (a person and an address) in one transaction. An
// instance that only looks (Allowed) learns of the other's failures at its own next failure: so
// the two let through at most one failure each past the burst, and none once they know.
// Failures past the limit do not lengthen the wait.
func TestFailuresSpentOnOneInstanceRefuseOnTheOther(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	a := ratelimit.New(db, "test.fail", 3, time.Minute, clk.Now)
	b := ratelimit.New(db, "test.fail", 3, time.Minute, clk.Now)
	names := []string{"user:alice", "address:192.0.2.9"}
	for range 3 {
		if ok, err := a.Spend(t.Context(), names...); err != nil || !ok {
			t.Fatalf("spend within the burst: %v, %v", ok, err)
		}
	}
	if ok, _ := a.Allowed(names...); ok {
		t.Fatal("the instance that failed thrice still allows")
	}
	// b has not seen them: it lets one more attempt through, whose failure tells it.
	if ok, _ := b.Allowed(names...); !ok {
		t.Fatal("b refused before it could know")
	}
	if ok, err := b.Spend(t.Context(), names...); err != nil || ok {
		t.Fatalf("b's failure past the burst: %v, %v", ok, err)
	}
	if ok, _ := b.Allowed(names...); ok {
		t.Fatal("b allows after learning the limit is spent")
	}
	// The address alone is spent for everyone: another user from it is refused too.
	if ok, _ := b.Allowed("user:bob", "address:192.0.2.9"); ok {
		t.Fatal("another person from the exhausted address is allowed")
	}
	// Spending past the limit did not push the wait out: a minute later one more is allowed.
	for range 5 {
		if _, err := a.Spend(t.Context(), names...); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	if ok, err := b.Take(t.Context(), names...); err != nil || !ok {
		t.Fatalf("a minute later: %v, %v", ok, err)
	}
}

// A failure the store cannot record (here: the database is gone) is still counted on the
// instance, so an outage or contention does not open the limit there.
func TestFailuresAreCountedLocallyWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	l := ratelimit.New(db, "test.down", 2, time.Minute, clk.Now)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 2 {
		if _, err := l.Spend(ctx, "address:192.0.2.3"); err == nil {
			t.Fatal("a spend with a cancelled context succeeded")
		}
	}
	if ok, _ := l.Allowed("address:192.0.2.3"); ok {
		t.Fatal("two failures the store lost left the limit open")
	}
}
