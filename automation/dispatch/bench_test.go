package dispatch_test

import (
	"fmt"
	"testing"
)

// BenchmarkDeliver is the dispatcher's share of a webhook delivery: sample, match, duplicate
// check, filter, concurrency count and the run's creation, on the Firestore emulator.
func BenchmarkDeliver(b *testing.B) {
	f := newFixture(b)
	f.automation(b, true, prOpened, `{"concurrency_limit":100}`)
	d := f.dispatcher(100)
	n := 0
	for b.Loop() {
		n++
		if _, err := d.Deliver(b.Context(), delivery(fmt.Sprintf("guid-%d", n), `{"pull_request":{"draft":false}}`)); err != nil {
			b.Fatal(err)
		}
	}
}
