package dispatch_test

import (
	"fmt"
	"testing"
)

// BenchmarkDeliver is the dispatcher's share of a webhook delivery: sample, match, duplicate
// check, body claim (GitHub's deliveries carry a body key), filter, concurrency count and the
// run's creation, on the Firestore emulator.
func BenchmarkDeliver(b *testing.B) {
	for _, bc := range []struct {
		name     string
		bodyKeys bool
	}{{"signed delivery key", false}, {"with a body claim", true}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b)
			f.automation(b, true, prOpened, `{"concurrency_limit":100}`)
			d := f.dispatcher(100)
			n := 0
			for b.Loop() {
				n++
				del := delivery(fmt.Sprintf("guid-%d", n), `{"pull_request":{"draft":false}}`)
				if bc.bodyKeys {
					del.BodyKey = fmt.Sprintf("sha256:%d", n)
				}
				if _, err := d.Deliver(b.Context(), del); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
