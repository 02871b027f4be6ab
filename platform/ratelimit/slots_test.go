package ratelimit_test

import (
	"testing"

	"github.com/hangar-dev/hangar/platform/ratelimit"
)

func TestSlotsBoundEachNameAndTheTotalWithoutWaiting(t *testing.T) {
	s := ratelimit.NewSlots(2, 3)
	take := func(name string, want bool) func() {
		t.Helper()
		release, ok := s.Take(name)
		if ok != want {
			t.Fatalf("Take(%q) = %v, want %v", name, ok, want)
		}
		return release
	}
	a1 := take("a", true)
	take("a", true)
	take("a", false) // a's own bound
	b1 := take("b", true)
	take("b", false) // the total
	take("c", false)

	b1()
	b1() // a second release gives nothing more back
	take("c", true)
	take("b", false)
	a1()
	c := take("b", true)
	take("d", false) // full again: a, b and c hold one each
	c()
	take("a", true) // a held one of its two
	take("a", false)
}
