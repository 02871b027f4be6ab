package composition

import (
	"net/http"
	"strings"
	"time"
)

// How long a client may hold a connection without making progress. Streams (Exec output,
// file transfers, StreamEvents, server-sent events) may rightly run for hours, so there is no
// ReadTimeout or WriteTimeout on the server: what a slow client can hold is bounded by the
// header timeout, the idle timeout, and a body deadline on unary calls only.
const (
	// ReadHeaderTimeout bounds the request line and headers: a client dribbling them (slowloris)
	// is cut off.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a kept-alive connection with no request in flight.
	IdleTimeout = 2 * time.Minute
	// UnaryBodyTimeout bounds reading the body of a unary call (at most MaxRequestBytes).
	UnaryBodyTimeout = time.Minute
	// MaxHeaderBytes bounds the request headers.
	MaxHeaderBytes = 64 << 10
)

// NewServer serves h over HTTP/1.1 and unencrypted HTTP/2, so gRPC clients work as well as
// Connect and gRPC-Web ones, with the timeouts above.
func NewServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           unaryBodyDeadline(h, UnaryBodyTimeout),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
}

// unaryBodyDeadline gives the body of each unary call (a Connect unary call, a webhook, a push)
// d to arrive. A deadline that passes once the body is read cuts nothing: HTTP/1 clears it when
// it starts watching for the client going away, and HTTP/2 only fails reads of a body already
// read, so a slow handler behind it (an image pull) runs on. Streaming calls (Connect streams,
// gRPC, gRPC-Web) and bodiless requests (server-sent events) are left alone.
func unaryBodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 && !streaming(r.Header.Get("Content-Type")) {
			// A writer that cannot take deadlines (none of net/http's) leaves the body unbounded.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		h.ServeHTTP(w, r)
	})
}

// streaming reports whether a request's content type is a streaming protocol's.
func streaming(contentType string) bool {
	return strings.HasPrefix(contentType, "application/connect+") || strings.HasPrefix(contentType, "application/grpc")
}
