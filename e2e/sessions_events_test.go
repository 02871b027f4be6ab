package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// eventCount is how many events the streaming tests write while readers follow them.
const eventCount = 10_000

// eventSession makes a session of the admin with no sandbox and a writer for its log: the
// events come faster than any operation could make them, which is the point.
func eventSession(t *testing.T) (*stack, *eventlog.Writer, string) {
	t.Helper()
	db, _ := testenv.Firestore(t)
	s := serveSessions(t, db)
	ctx := context.Background()
	admin, err := s.api.Users().EnsureHuman(ctx, "admin@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id := "events-1"
	if _, err := sessiondb.NewStore(db, time.Now).Create(ctx, &sessiondb.Record{ID: id, Owner: admin.ID, Status: sessiondb.Evicted, ImageURI: "example/none"}, 0); err != nil {
		t.Fatal(err)
	}
	w, err := eventlog.OpenWriter(ctx, db, id, eventlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return s, w, id
}

// writeEvents appends eventCount events, every tenth not durable, at a steady pace so readers
// see both a backlog and a live tail.
func writeEvents(w *eventlog.Writer) {
	for i := 1; i <= eventCount; i++ {
		w.Append(eventlog.Event{Kind: eventlog.KindExecStarted, PayloadJSON: fmt.Sprintf(`{"n":%d}`, i), Durable: i%10 != 0})
		if i%500 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// checkSequence fails unless got holds exactly the idx 1..n in order.
func checkSequence(t *testing.T, what string, got []int64, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%s: %d events, want %d", what, len(got), n)
	}
	for i, idx := range got {
		if idx != int64(i+1) {
			t.Fatalf("%s: event %d has idx %d: a gap or a duplicate", what, i, idx)
		}
	}
}

func TestStreamEventsResumesWithNothingLostOrDoubled(t *testing.T) {
	s, w, id := eventSession(t)
	go writeEvents(w)
	svc := appv1connect.NewSessionServiceClient(streamClient, s.rpcURL(), auth.WithKey(s.admin))
	var got []int64
	// Three connections, each dropped by the client part-way, each resuming after the last idx.
	for _, stopAt := range []int{2_500, 6_000, eventCount} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		req := &appv1.StreamEventsRequest{SessionId: id}
		if len(got) > 0 {
			req.Since = ptr(got[len(got)-1])
		}
		stream, err := svc.StreamEvents(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		for len(got) < stopAt && stream.Receive() {
			got = append(got, stream.Msg().GetIdx())
		}
		if len(got) < stopAt {
			t.Fatalf("stream ended after %d events: %v", len(got), stream.Err())
		}
		cancel()
		stream.Close()
	}
	checkSequence(t, "StreamEvents", got, eventCount)

	// durable_only leaves out the progress events, and only them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := svc.StreamEvents(ctx, connect.NewRequest(&appv1.StreamEventsRequest{SessionId: id, DurableOnly: true}))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < eventCount*9/10 && stream.Receive() {
		if stream.Msg().GetIdx()%10 == 0 {
			t.Fatalf("durable_only sent progress event %d", stream.Msg().GetIdx())
		}
		n++
	}
	if n != eventCount*9/10 {
		t.Fatalf("durable_only sent %d events: %v", n, stream.Err())
	}
}

func TestSSEResumesAfterLastEventID(t *testing.T) {
	s, w, id := eventSession(t)
	go writeEvents(w)
	var got []int64
	for i, stopAt := range []int{4_000, eventCount} {
		ctx, cancel := context.WithCancel(context.Background())
		// EventSource cannot set headers: the first connection passes the key as a parameter;
		// the reconnection uses the header and Last-Event-ID, as a browser's retry would.
		url := s.url + "/api/v1/sessions/" + id + "/events"
		if i == 0 {
			url += "?api_key=" + s.admin
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			req.Header.Set("x-api-key", s.admin)
			req.Header.Set("Last-Event-ID", strconv.FormatInt(got[len(got)-1], 10))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("SSE answered %s %s", resp.Status, resp.Header.Get("Content-Type"))
		}
		sc := bufio.NewScanner(resp.Body)
		for len(got) < stopAt && sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				idx, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("bad id line %q", sc.Text())
				}
				got = append(got, idx)
			}
		}
		cancel()
		resp.Body.Close()
	}
	checkSequence(t, "SSE", got, eventCount)
}

func TestSSERefusesBadRequests(t *testing.T) {
	db, _ := testenv.Firestore(t)
	s := serveSessions(t, db)
	for _, tc := range []struct {
		name, path, key, lastID string
		status                  int
	}{
		{"no key", "/api/v1/sessions/nope/events", "", "", http.StatusUnauthorized},
		{"wrong key", "/api/v1/sessions/nope/events", "hgr_bad", "", http.StatusUnauthorized},
		{"unknown session", "/api/v1/sessions/nope/events", s.admin, "", http.StatusNotFound},
		{"bad Last-Event-ID", "/api/v1/sessions/nope/events", s.admin, "yesterday", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, s.url+tc.path, nil)
			if tc.key != "" {
				req.Header.Set("x-api-key", tc.key)
			}
			if tc.lastID != "" {
				req.Header.Set("Last-Event-ID", tc.lastID)
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}
