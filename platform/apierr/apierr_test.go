package apierr

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
)

// What trying again cannot fix is a refusal; what might pass on a retry (an unreachable
// store, a deadline, a plain error) is not.
func TestRefusalIsWhatARetryCannotFix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"invalid argument", InvalidArgument("f", "is required"), true},
		{"not found", NotFound("task", "task_1"), true},
		{"failed precondition", FailedPrecondition("archived"), true},
		{"permission denied", PermissionDenied("no"), true},
		{"unauthenticated", Unauthenticated(), true},
		{"already exists", AlreadyExists("taken"), true},
		{"unimplemented", connect.NewError(connect.CodeUnimplemented, errors.New("later")), true},
		{"wrapped refusal", fmt.Errorf("start: %w", NotFound("profile", "p")), true},
		{"unavailable", connect.NewError(connect.CodeUnavailable, errors.New("down")), false},
		{"deadline", connect.NewError(connect.CodeDeadlineExceeded, errors.New("slow")), false},
		{"aborted", Aborted("version"), false},
		{"resource exhausted", ResourceExhausted("limit"), false},
		{"plain error", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Refusal(tc.err); got != tc.want {
				t.Fatalf("Refusal(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
