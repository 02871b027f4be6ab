package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// openWriter opens sessionID's writer and closes it when the test ends.
func openWriter(t testing.TB, db *firestore.Client, sessionID string) *eventlog.Writer {
	t.Helper()
	w, err := eventlog.OpenWriter(context.Background(), db, sessionID, eventlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return w
}

func flush(t testing.TB, w *eventlog.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func idxs(events []eventlog.Event) []int64 {
	out := make([]int64, len(events))
	for i, ev := range events {
		out[i] = ev.Idx
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func sameIdxs(t testing.TB, got, want []int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("idx %v, want %v", got, want)
	}
}

// wantSequence fails t unless got is exactly from..to, naming the first divergence: a short
// message beats printing 10,000 numbers.
func wantSequence(t testing.TB, got []int64, from, to int64) {
	t.Helper()
	for i, idx := range got {
		if want := from + int64(i); idx != want {
			t.Fatalf("delivery %d has idx %d, want %d (got %d events)", i, idx, want, len(got))
		}
	}
	if want := int(to - from + 1); len(got) != want {
		t.Fatalf("got %d events, want %d", len(got), want)
	}
}

func TestAppendAssignsConsecutiveIdxAndFlushMakesThemReadable(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	w := openWriter(t, db, "s1")
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	appended := []eventlog.Event{
		{Kind: eventlog.KindSessionStatus, PayloadJSON: `{"from":"starting","to":"running"}`, Durable: true},
		{Kind: eventlog.KindExecStarted, At: at},
		{Kind: eventlog.KindToolCall, ToolName: "bash", PayloadJSON: `{"cmd":"ls"}`},
	}
	for i, ev := range appended {
		if got := w.Append(ev); got != int64(i+1) {
			t.Fatalf("Append %d returned idx %d, want %d", i, got, i+1)
		}
	}
	if got := w.LastIdx(); got != 3 {
		t.Fatalf("LastIdx %d, want 3", got)
	}
	flush(t, w)

	events, next, err := eventlog.NewReader(db).List(context.Background(), "s1", eventlog.Query{})
	if err != nil {
		t.Fatal(err)
	}
	sameIdxs(t, idxs(events), []int64{1, 2, 3})
	if next != 3 {
		t.Fatalf("next_after_idx %d, want 3", next)
	}
	want := []eventlog.Event{
		{Idx: 1, Kind: eventlog.KindSessionStatus, PayloadJSON: `{"from":"starting","to":"running"}`, Durable: true},
		{Idx: 2, Kind: eventlog.KindExecStarted, PayloadJSON: "{}", At: at},
		{Idx: 3, Kind: eventlog.KindToolCall, ToolName: "bash", PayloadJSON: `{"cmd":"ls"}`},
	}
	for i, ev := range events {
		if ev.At.IsZero() {
			t.Errorf("event %d has no At", ev.Idx)
		}
		if want[i].At.IsZero() {
			ev.At = time.Time{}
		}
		ev.At, want[i].At = ev.At.UTC(), want[i].At.UTC()
		if ev != want[i] {
			t.Errorf("event %d = %+v, want %+v", ev.Idx, ev, want[i])
		}
	}
}

func TestConcurrentAppendsGetDistinctConsecutiveIdx(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	w := openWriter(t, db, "s1")
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	seen := make([][]int64, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				seen[g] = append(seen[g], w.Append(eventlog.Event{Kind: "k"}))
			}
		})
	}
	wg.Wait()
	taken := map[int64]bool{}
	for _, s := range seen {
		for i, idx := range s {
			if i > 0 && idx <= s[i-1] {
				t.Fatalf("one goroutine got idx %d after %d", idx, s[i-1])
			}
			if taken[idx] {
				t.Fatalf("idx %d assigned twice", idx)
			}
			taken[idx] = true
		}
	}
	flush(t, w)
	events, err := eventlog.NewReader(db).Tail(context.Background(), "s1", eventlog.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	wantSequence(t, idxs(events), 1, goroutines*each)
}

func TestOpenWriterContinuesAfterTheLastStoredIdx(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	ctx := context.Background()
	first, err := eventlog.OpenWriter(ctx, db, "s1", eventlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		first.Append(eventlog.Event{Kind: "k"})
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	second := openWriter(t, db, "s1")
	if got := second.LastIdx(); got != 3 {
		t.Fatalf("reopened writer starts after %d, want 3", got)
	}
	if got := second.Append(eventlog.Event{Kind: "k"}); got != 4 {
		t.Fatalf("reopened writer assigned %d, want 4", got)
	}
	flush(t, second)
	events, _, err := eventlog.NewReader(db).List(ctx, "s1", eventlog.Query{})
	if err != nil {
		t.Fatal(err)
	}
	sameIdxs(t, idxs(events), []int64{1, 2, 3, 4})

	other := openWriter(t, db, "s2")
	if got := other.Append(eventlog.Event{Kind: "k"}); got != 1 {
		t.Fatalf("another session's first idx %d, want 1", got)
	}
}

func TestAppendStoresOnlyJSONObjectPayloads(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	w := openWriter(t, db, "s1")
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{"empty becomes an empty object", "", "{}"},
		{"blank becomes an empty object", "  \n", "{}"},
		{"an object is kept as is", `{"a":[1,2],"b":"ü"}`, `{"a":[1,2],"b":"ü"}`},
		{"an array is replaced", `[1,2]`, `{"payload_dropped":"not_a_json_object","size_bytes":5}`},
		{"broken JSON is replaced", `{"a":`, `{"payload_dropped":"not_a_json_object","size_bytes":5}`},
		{"invalid UTF-8 is replaced", "{\"a\":\"\xff\"}", `{"payload_dropped":"not_a_json_object","size_bytes":9}`},
		{"an oversized object is replaced", `{"a":"` + strings.Repeat("x", eventlog.MaxPayloadBytes) + `"}`,
			fmt.Sprintf(`{"payload_dropped":"too_large","size_bytes":%d}`, eventlog.MaxPayloadBytes+8)},
	}
	reader := eventlog.NewReader(db)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := w.Append(eventlog.Event{Kind: "k", PayloadJSON: tc.payload})
			flush(t, w)
			events, _, err := reader.List(context.Background(), "s1", eventlog.Query{AfterIdx: idx - 1, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != 1 || events[0].Idx != idx {
				t.Fatalf("read %v, want idx %d", idxs(events), idx)
			}
			if events[0].PayloadJSON != tc.want {
				t.Fatalf("stored payload %.80q, want %.80q", events[0].PayloadJSON, tc.want)
			}
		})
	}
}

// seedPagingLog writes 20 events: odd idx are exec.started, even idx are tool.call alternating
// between the tools "bash" (idx%4 == 2) and "edit" (idx%4 == 0); idx divisible by 5 are durable.
func seedPagingLog(t *testing.T, db *firestore.Client, sessionID string) {
	t.Helper()
	w := openWriter(t, db, sessionID)
	for i := int64(1); i <= 20; i++ {
		ev := eventlog.Event{Kind: eventlog.KindExecStarted, Durable: i%5 == 0}
		if i%2 == 0 {
			ev.Kind, ev.ToolName = eventlog.KindToolCall, "bash"
			if i%4 == 0 {
				ev.ToolName = "edit"
			}
		}
		w.Append(ev)
	}
	flush(t, w)
}

func TestListPagesForwardAndBackwardWithFilters(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	seedPagingLog(t, db, "s1")
	reader := eventlog.NewReader(db)
	tests := []struct {
		name     string
		query    eventlog.Query
		wantIdxs []int64
		wantNext int64
	}{
		{"the first page starts at idx 1", eventlog.Query{Limit: 5}, span(1, 5), 5},
		{"after_idx continues forward", eventlog.Query{AfterIdx: 5, Limit: 5}, span(6, 10), 10},
		{"the last page is short", eventlog.Query{AfterIdx: 17, Limit: 5}, span(18, 20), 20},
		{"past the end nothing matches and next stays", eventlog.Query{AfterIdx: 20, Limit: 5}, nil, 20},
		{"the default limit covers the whole log", eventlog.Query{}, span(1, 20), 20},
		{"before_idx alone takes the last events before it", eventlog.Query{BeforeIdx: 21, Limit: 5}, span(16, 20), 20},
		{"before_idx pages further back", eventlog.Query{BeforeIdx: 16, Limit: 5}, span(11, 15), 15},
		{"before_idx near the start returns what there is", eventlog.Query{BeforeIdx: 3, Limit: 5}, span(1, 2), 2},
		{"after_idx and before_idx bound a range from its start", eventlog.Query{AfterIdx: 3, BeforeIdx: 12, Limit: 4}, span(4, 7), 7},
		{"kinds keep only those kinds", eventlog.Query{Kinds: []string{eventlog.KindToolCall}, Limit: 3}, []int64{2, 4, 6}, 6},
		{"kinds page backward", eventlog.Query{Kinds: []string{eventlog.KindExecStarted}, BeforeIdx: 10, Limit: 2}, []int64{7, 9}, 9},
		{"tool_names keep only those tools", eventlog.Query{ToolNames: []string{"edit"}, AfterIdx: 4}, []int64{8, 12, 16, 20}, 20},
		{"several tool names", eventlog.Query{ToolNames: []string{"edit", "bash", "edit"}, AfterIdx: 14}, []int64{16, 18, 20}, 20},
		{"kinds and tool_names combine", eventlog.Query{Kinds: []string{eventlog.KindToolCall, "other"}, ToolNames: []string{"bash"}, Limit: 2}, []int64{2, 6}, 6},
		{"a kind nobody wrote matches nothing", eventlog.Query{Kinds: []string{"nope"}, AfterIdx: 3}, nil, 3},
		{"durable_only skips progress events", eventlog.Query{DurableOnly: true}, []int64{5, 10, 15, 20}, 20},
		{"durable_only with kinds", eventlog.Query{DurableOnly: true, Kinds: []string{eventlog.KindToolCall}}, []int64{10, 20}, 20},
		{"a limit above the maximum is cut, not refused", eventlog.Query{Limit: eventlog.MaxListLimit + 1}, span(1, 20), 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events, next, err := reader.List(context.Background(), "s1", tc.query)
			if err != nil {
				t.Fatal(err)
			}
			sameIdxs(t, idxs(events), tc.wantIdxs)
			if next != tc.wantNext {
				t.Fatalf("next_after_idx %d, want %d", next, tc.wantNext)
			}
		})
	}
}

func TestListOfAnUnknownSessionIsEmpty(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	events, next, err := eventlog.NewReader(db).List(context.Background(), "never", eventlog.Query{AfterIdx: 7})
	if err != nil || len(events) != 0 || next != 7 {
		t.Fatalf("List = %v, %d, %v; want nothing, 7, nil", idxs(events), next, err)
	}
}

func TestTailReturnsTheLastEventsInOrder(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	seedPagingLog(t, db, "s1")
	reader := eventlog.NewReader(db)
	tests := []struct {
		name string
		n    int
		want []int64
	}{
		{"the last three", 3, span(18, 20)},
		{"more than there are", 50, span(1, 20)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			events, err := reader.Tail(context.Background(), "s1", tc.n)
			if err != nil {
				t.Fatal(err)
			}
			sameIdxs(t, idxs(events), tc.want)
		})
	}
}

func TestLastIsTheNewestEventOfAKind(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	seedPagingLog(t, db, "s1")
	reader := eventlog.NewReader(db)
	tests := []struct {
		name, session, kind string
		want                int64 // 0: none
	}{
		{"the newest of many", "s1", eventlog.KindToolCall, 20},
		{"the newest of the other kind", "s1", eventlog.KindExecStarted, 19},
		{"a kind the log lacks", "s1", eventlog.KindNetUsage, 0},
		{"a session without a log", "never", eventlog.KindToolCall, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ok, err := reader.Last(context.Background(), tc.session, tc.kind)
			if err != nil || ok != (tc.want != 0) || e.Idx != tc.want || ok && e.Kind != tc.kind {
				t.Fatalf("Last = %d %q, %v, %v; want idx %d", e.Idx, e.Kind, ok, err, tc.want)
			}
		})
	}
}

func TestReadsRefuseInvalidInputWithTheField(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	reader := eventlog.NewReader(db)
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("v", i)
		}
		return out
	}
	tests := []struct {
		name      string
		sessionID string
		query     eventlog.Query
		wantField string
	}{
		{"31 kinds", "s1", eventlog.Query{Kinds: many(31)}, "kinds"},
		{"31 tool names", "s1", eventlog.Query{ToolNames: many(31)}, "tool_names"},
		{"more kind × tool combinations than Firestore allows", "s1", eventlog.Query{Kinds: many(6), ToolNames: many(6)}, "tool_names"},
		{"a negative limit", "s1", eventlog.Query{Limit: -1}, "limit"},
		{"a negative after_idx", "s1", eventlog.Query{AfterIdx: -1}, "after_idx"},
		{"a negative before_idx", "s1", eventlog.Query{BeforeIdx: -1}, "before_idx"},
		{"an empty session id", "", eventlog.Query{}, "session_id"},
		{"a session id with a slash", "a/b", eventlog.Query{}, "session_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := reader.List(context.Background(), tc.sessionID, tc.query)
			if !errors.Is(err, eventlog.ErrInvalidQuery) {
				t.Fatalf("got %v, want ErrInvalidQuery", err)
			}
			var qe *eventlog.QueryError
			if !errors.As(err, &qe) || qe.Field != tc.wantField {
				t.Fatalf("got %v, want a QueryError on %s", err, tc.wantField)
			}
		})
	}
	t.Run("exactly 30 kinds are accepted", func(t *testing.T) {
		if _, _, err := reader.List(context.Background(), "s1", eventlog.Query{Kinds: many(30)}); err != nil {
			t.Fatal(err)
		}
	})
}

// follow runs Follow in the background, sending each delivered idx on the returned channel.
// The channel closes when Follow returns; its error is then in *errOut.
func follow(ctx context.Context, reader *eventlog.Reader, sessionID string, since int64, errOut *error) <-chan int64 {
	got := make(chan int64, 1024)
	go func() {
		defer close(got)
		*errOut = reader.Follow(ctx, sessionID, since, func(ev eventlog.Event) error {
			select {
			case got <- ev.Idx:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return got
}

// collect reads idx from got until it has n of them or ctx ends.
func collect(ctx context.Context, got <-chan int64, n int) []int64 {
	var out []int64
	for len(out) < n {
		select {
		case idx, ok := <-got:
			if !ok {
				return out
			}
			out = append(out, idx)
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// appendConcurrently appends n events from four goroutines in the background and flushes.
func appendConcurrently(t *testing.T, w *eventlog.Writer, n int) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range n / 4 {
					w.Append(eventlog.Event{Kind: eventlog.KindExecStarted, PayloadJSON: `{"exec_id":"e"}`})
				}
			})
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		done <- w.Flush(ctx)
	}()
	return done
}

func TestFollowFromZeroGetsEveryConcurrentAppendOnceInOrder(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	w := openWriter(t, db, "s1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var followErr error
	got := follow(ctx, eventlog.NewReader(db), "s1", 0, &followErr)

	const n = 10000
	appended := appendConcurrently(t, w, n)
	delivered := collect(ctx, got, n)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	wantSequence(t, delivered, 1, n)
	cancel()
	for range got {
		t.Fatal("an event was delivered after the last one")
	}
	if !errors.Is(followErr, context.Canceled) {
		t.Fatalf("Follow returned %v, want context.Canceled", followErr)
	}
}

func TestFollowResumedFromTheLastDeliveredIdxLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	w := openWriter(t, db, "s1")
	reader := eventlog.NewReader(db)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const n = 6000
	appended := appendConcurrently(t, w, n)
	firstCtx, stopFirst := context.WithCancel(ctx)
	var firstErr error
	first := follow(firstCtx, reader, "s1", 0, &firstErr)
	delivered := collect(ctx, first, 2500)
	stopFirst()
	for range first {
		// Events Follow was handing over when cancelled were never received: resume after
		// the last one the consumer actually got, as a disconnected client would.
	}
	if !errors.Is(firstErr, context.Canceled) {
		t.Fatalf("first Follow returned %v, want context.Canceled", firstErr)
	}

	var secondErr error
	second := follow(ctx, reader, "s1", delivered[len(delivered)-1], &secondErr)
	delivered = append(delivered, collect(ctx, second, n-len(delivered))...)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	wantSequence(t, delivered, 1, n)
}

func TestFollowSinceBeyondTheEndWaitsForNewEvents(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	w := openWriter(t, db, "s1")
	for range 5 {
		w.Append(eventlog.Event{Kind: "k"})
	}
	flush(t, w)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var followErr error
	got := follow(ctx, eventlog.NewReader(db), "s1", 8, &followErr)
	for range 5 {
		w.Append(eventlog.Event{Kind: "k"})
	}
	flush(t, w)
	sameIdxs(t, collect(ctx, got, 2), []int64{9, 10})
}

func TestFollowReturnsTheCallbackError(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	w := openWriter(t, db, "s1")
	for range 3 {
		w.Append(eventlog.Event{Kind: "k"})
	}
	flush(t, w)
	stop := errors.New("client went away")
	var delivered []int64
	err := eventlog.NewReader(db).Follow(context.Background(), "s1", 0, func(ev eventlog.Event) error {
		delivered = append(delivered, ev.Idx)
		if ev.Idx == 2 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Follow returned %v, want the callback's error", err)
	}
	sameIdxs(t, delivered, []int64{1, 2})
}

func TestWriterCloseIsFinal(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	ctx := context.Background()
	w, err := eventlog.OpenWriter(ctx, db, "s1", eventlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(eventlog.Event{Kind: "k"})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	events, _, err := eventlog.NewReader(db).List(ctx, "s1", eventlog.Query{})
	if err != nil {
		t.Fatal(err)
	}
	sameIdxs(t, idxs(events), []int64{1})
	defer func() {
		if recover() == nil {
			t.Fatal("Append after Close did not panic")
		}
	}()
	w.Append(eventlog.Event{Kind: "k"})
}

func TestWriteFailuresKeepEventsQueuedAndAreReported(t *testing.T) {
	t.Parallel()
	db, project := testenv.Firestore(t)
	ctx := context.Background()
	own, err := store.Open(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	w, err := eventlog.OpenWriter(ctx, own, "s1", eventlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	w.Append(eventlog.Event{Kind: "k"})
	w.Append(eventlog.Event{Kind: "k"})

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = w.Flush(short)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last write error") {
		t.Fatalf("Flush on a closed client returned %v, want the deadline with the write error", err)
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if err := w.Close(done); err == nil || !strings.Contains(err.Error(), "events 1..2") {
		t.Fatalf("Close returned %v, want the unwritten events named", err)
	}
	events, _, err := eventlog.NewReader(db).List(ctx, "s1", eventlog.Query{})
	if err != nil || len(events) != 0 {
		t.Fatalf("List = %v, %v; want nothing stored", idxs(events), err)
	}
}

func TestOpenWriterRefusesABadSessionID(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	_, err := eventlog.OpenWriter(context.Background(), db, "a/b", eventlog.WriterOptions{})
	if !errors.Is(err, eventlog.ErrInvalidQuery) {
		t.Fatalf("got %v, want ErrInvalidQuery", err)
	}
}

func TestIsConversation(t *testing.T) {
	t.Parallel()
	for _, kind := range eventlog.ConversationKinds() {
		if !eventlog.IsConversation(kind) {
			t.Errorf("IsConversation(%q) = false for a listed conversation kind", kind)
		}
	}
	for _, kind := range []string{eventlog.KindSessionStatus, eventlog.KindFileWritten, eventlog.KindSnapshotTaken, ""} {
		if eventlog.IsConversation(kind) {
			t.Errorf("IsConversation(%q) = true", kind)
		}
	}
	if n := len(eventlog.ConversationKinds()); n != 13 {
		t.Errorf("%d conversation kinds, want the 13 documented", n)
	}
}

func TestFollowPassesOverAHoleThatNeverFills(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	col := db.Collection("sessions").Doc("holey").Collection("events")
	for _, idx := range []int64{1, 2, 4, 5} {
		ev := eventlog.Event{Idx: idx, Kind: "k", PayloadJSON: "{}", At: time.Now().UTC(), Durable: true}
		if _, err := col.Doc(fmt.Sprintf("%020d", idx)).Set(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var err error
	got := collect(ctx, follow(ctx, eventlog.NewReader(db), "holey", 0, &err), 4)
	if fmt.Sprint(got) != "[1 2 4 5]" {
		t.Fatalf("delivered %v, want [1 2 4 5] in order", got)
	}
}
