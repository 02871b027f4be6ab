package supervisor

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

func TestDialAppRelaysBothWaysAndHalfCloses(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				// Reads everything, then answers it upper-cased: the answer needs the client's EOF.
				b, _ := io.ReadAll(c)
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
				c.Close()
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	conn, err := sv.DialApp(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello app")); err != nil {
		t.Fatal(err)
	}
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "HELLO APP" {
		t.Errorf("app answered %q, want %q", got, "HELLO APP")
	}
}

func TestDialAppRefusals(t *testing.T) {
	sv := startSupervisor(t, startConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	tests := []struct {
		name string
		port int
		want ErrorCode
	}{
		{"nothing listens", closed, CodeDialFailed},
		{"not a port", 70000, CodeBadRequest},
		{"zero", 0, CodeBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sv.DialApp(context.Background(), tc.port)
			var fe *Error
			if !errors.As(err, &fe) || fe.Code != tc.want {
				t.Fatalf("err = %v, want code %s", err, tc.want)
			}
		})
	}
}
