package oauthcreds

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/credentials"
)

// The sweep deletes a flow once it has been kept credentials.FlowKept past its expiry, and not
// before: until then GetFlow still says how it ended.
func TestSweepDeletesFlowsKeptPastTheirExpiry(t *testing.T) {
	h := newHarness(t)
	id, _ := beginRedirect(t, h, nil)
	get := func() (*connect.Response[appv1.GetFlowResponse], error) {
		return h.svc.GetFlow(h.alice, connect.NewRequest(&appv1.GetFlowRequest{Subject: userSubject, FlowId: id}))
	}
	h.clock.Advance(redirectFlowTTL + time.Minute)
	if err := h.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f, err := get(); err != nil || f.Msg.GetFlow().GetStatus() != credentials.FlowExpired {
		t.Fatalf("an expired flow within FlowKept: %v %v", f, err)
	}
	h.clock.Advance(credentials.FlowKept)
	if err := h.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := get()
	testenv.WantCode(t, err, connect.CodeNotFound)
}
