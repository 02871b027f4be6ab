package eventlog_test

import (
	"context"
	"testing"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// BenchmarkAppendToFollow measures one event's trip from Append on the host to delivery by a
// running Follow: linger, commit, doorbell snapshot and catch-up query.
func BenchmarkAppendToFollow(b *testing.B) {
	db, _ := testenv.Firestore(b)
	w := openWriter(b, db, "s1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var followErr error
	got := follow(ctx, eventlog.NewReader(db), "s1", 0, &followErr)
	for b.Loop() {
		idx := w.Append(eventlog.Event{Kind: eventlog.KindExecStarted, PayloadJSON: `{"exec_id":"e1"}`})
		if delivered := <-got; delivered != idx {
			b.Fatalf("delivered %d, want %d (Follow: %v)", delivered, idx, followErr)
		}
	}
}

// BenchmarkAppendFlush100 measures appending 100 events and waiting until they are stored.
func BenchmarkAppendFlush100(b *testing.B) {
	db, _ := testenv.Firestore(b)
	w := openWriter(b, db, "s1")
	ctx := context.Background()
	for b.Loop() {
		for range 100 {
			w.Append(eventlog.Event{Kind: eventlog.KindExecStarted, PayloadJSON: `{"exec_id":"e1","argv":["ls","-l"]}`})
		}
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
