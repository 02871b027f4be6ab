package host_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// TestHostAPINeedsTheHostToken replays a caller on the host's network that is not one of the
// deployment's functions: without the host token, or with another, every method — unary and
// streaming — is unauthenticated before it looks at its request; with it, the call reaches the
// method, which answers failed_precondition for a session that has no sandbox on this host.
func TestHostAPINeedsTheHostToken(t *testing.T) {
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	h := sb.StartHost(t, "token-host")
	addr := "http://" + h.Addr
	clientWith := func(token string) *hostclient.Pool {
		return hostclient.New(fleet.New(db, time.Now, time.Minute), token)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		token string
		want  connect.Code
	}{
		{"no token", "", connect.CodeUnauthenticated},
		{"another token", "not-the-host-token", connect.CodeUnauthenticated},
		{"the token with a suffix", sb.Config.HostToken + "x", connect.CodeUnauthenticated},
		{"the host token", sb.Config.HostToken, connect.CodeFailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clientWith(tc.token).Client(addr)
			_, err := c.GetCowState(ctx, connect.NewRequest(&appv1.GetCowStateRequest{SessionId: "sess_elsewhere"}))
			testenv.WantCode(t, err, tc.want)

			stream, err := c.Exec(ctx, connect.NewRequest(&appv1.ExecRequest{SessionId: "sess_elsewhere", Argv: []string{"id"}}))
			if err == nil {
				for stream.Receive() {
					t.Fatalf("exec without a session streamed %v", stream.Msg())
				}
				err = stream.Err()
				stream.Close()
			}
			testenv.WantCode(t, err, tc.want)
		})
	}
}
