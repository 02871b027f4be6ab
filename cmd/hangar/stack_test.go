package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/platform/auth"
)

// serveAPI runs the API over d on a loopback server for t and returns its URL and a personal
// key of the person with email.
func serveAPI(t *testing.T, d composition.Deps, email string) (url, key string) {
	t.Helper()
	a := composition.New(d)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := composition.NewServer(a.Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	ctx := context.Background()
	u, err := a.Users().EnsureHuman(ctx, email, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, key, err = a.Keys().Create(ctx, auth.NewKeyInput{Name: email, Kind: auth.KindPersonal, UserID: u.ID}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return "http://" + ln.Addr().String(), key
}

// serveCLI is serveAPI with the client commands of t pointed at it.
func serveCLI(t *testing.T, d composition.Deps, email string) {
	t.Helper()
	url, key := serveAPI(t, d, email)
	t.Setenv("HANGAR_URL", url)
	t.Setenv("HANGAR_API_KEY", key)
}
