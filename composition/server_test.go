package composition

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveWith runs h behind NewServer's settings, with the unary body deadline d, on loopback.
func serveWith(t *testing.T, h http.Handler, d time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h)
	srv.Handler = unaryBodyDeadline(h, d)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestUnaryBodyDeadlineCutsADribbledBodyAndSparesTheRest(t *testing.T) {
	const d = 200 * time.Millisecond
	addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		// A slow handler after its body arrived (an image pull) is not cut off.
		time.Sleep(3 * d)
		if err := r.Context().Err(); err != nil {
			http.Error(w, "cancelled: "+err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "done")
	}), d)
	for _, tc := range []struct {
		name, contentType string
		dribble           bool
		wantStatus        string
	}{
		{"a unary body that arrives", "application/json", false, "200"},
		{"a unary body dribbled past the deadline", "application/json", true, "408"},
		{"a stream's body that takes its time", "application/connect+proto", true, "200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			body := strings.Repeat("x", 10)
			fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", tc.contentType, len(body))
			for i := range body {
				if tc.dribble {
					time.Sleep(d / 2)
				}
				if _, err := conn.Write([]byte{body[i]}); err != nil {
					break
				}
			}
			status, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil && status == "" {
				if tc.wantStatus == "408" {
					return // cut without an answer
				}
				t.Fatalf("no answer: %v", err)
			}
			if !strings.Contains(status, " "+tc.wantStatus+" ") {
				t.Fatalf("status line %q, want %s", status, tc.wantStatus)
			}
		})
	}
}
