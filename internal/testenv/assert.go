package testenv

import (
	"errors"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// WantCode fails t unless err is a Connect error with code want.
func WantCode(t testing.TB, err error, want connect.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %v", want)
	}
	if got := connect.CodeOf(err); got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
}

// ViolatedFields fails t unless err is invalid_argument, and returns the fields its
// google.rpc.BadRequest detail names, in order.
func ViolatedFields(t testing.TB, err error) []string {
	t.Helper()
	WantCode(t, err, connect.CodeInvalidArgument)
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a Connect error", err)
	}
	var fields []string
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatalf("decode error detail: %v", err)
		}
		if br, ok := v.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				fields = append(fields, fv.GetField())
			}
		}
	}
	return fields
}
