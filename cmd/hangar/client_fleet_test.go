package main

import (
	"strings"
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

func TestFleetListShowsEachHostsStateAndLoad(t *testing.T) {
	f := newFakeAPI(t)
	reply(f, appv1connect.FleetServiceListHostsProcedure, &appv1.ListHostsResponse{Hosts: []*appv1.SandboxHost{{
		Id: "h1", State: "cordoned", Zone: "z1", Address: "http://10.0.0.1:7070", HeartbeatAgeSeconds: 2,
		Capacity: &appv1.HostCapacity{Sandboxes: 8, MemoryBookableBytes: 4 << 30},
		Use:      &appv1.HostUse{Sandboxes: 3, MemoryBookedBytes: 1 << 30}, SessionsByState: map[string]int32{"running": 2, "idle": 1},
	}}})
	out := f.mustRun(t, "fleet", "list")
	assertContains(t, squash(out), "h1 cordoned z1 3/8 1024/4096 MiB 2s ago idle=1 running=2 http://10.0.0.1:7070")
}

func TestFleetCommandsSendTheHostTheyName(t *testing.T) {
	f := newFakeAPI(t)
	host := &appv1.SandboxHost{Id: "h1", State: "cordoned"}
	reply(f, appv1connect.FleetServiceCordonHostProcedure, &appv1.CordonHostResponse{Host: host})
	reply(f, appv1connect.FleetServiceUncordonHostProcedure, &appv1.UncordonHostResponse{Host: &appv1.SandboxHost{Id: "h1", State: "ready"}})
	reply(f, appv1connect.FleetServiceGetHostProcedure, &appv1.GetHostResponse{Host: host})
	assertContains(t, f.mustRun(t, "fleet", "cordon", "h1"), "host h1 is cordoned: no new sessions go to it\n")
	f.assertRequest(t, appv1connect.FleetServiceCordonHostProcedure, &appv1.CordonHostRequest{HostId: "h1"})
	assertContains(t, f.mustRun(t, "fleet", "uncordon", "h1"), "host h1 is ready\n")
	f.assertRequest(t, appv1connect.FleetServiceUncordonHostProcedure, &appv1.UncordonHostRequest{HostId: "h1"})
	assertContains(t, f.mustRun(t, "fleet", "get", "h1"), "id: h1\n", "state: cordoned\n")
	f.assertRequest(t, appv1connect.FleetServiceGetHostProcedure, &appv1.GetHostRequest{HostId: "h1"})
}

func TestFleetDrainFollowPrintsTheJobAndFailsWithIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		job     *appv1.FleetJob
		wantErr bool
		want    []string
	}{
		{"succeeded", &appv1.FleetJob{Id: "fjob_1", Kind: "drain", HostId: "h1", State: "succeeded", Total: 3, Moved: 2, Evicted: 1,
			Message: "3 sessions: 2 moved; the host is drained"}, false,
			[]string{"drain h1: succeeded, 3/3 sessions (moved 2, evicted 1, archived 0, failed 0, no checkpoint 0)\n", "the host is drained\n"}},
		{"failed", &appv1.FleetJob{Id: "fjob_2", Kind: "drain", HostId: "h1", State: "failed", Total: 1, Failed: 1,
			Failures: []string{"sess_x: checkpoint and evict: boom"}, Message: "the host stays draining"}, true,
			[]string{"failed: sess_x: checkpoint and evict: boom\n", "the host stays draining\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			reply(f, appv1connect.FleetServiceDrainHostProcedure, &appv1.DrainHostResponse{Job: tc.job})
			r := f.run(t, "fleet", "drain", "h1", "--force", "--follow")
			f.assertRequest(t, appv1connect.FleetServiceDrainHostProcedure, &appv1.DrainHostRequest{HostId: "h1", Force: true})
			if (r.err != nil) != tc.wantErr {
				t.Fatalf("exit %d: %v, want an error: %v", r.code, r.err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(r.msg(), tc.job.GetId()) {
				t.Errorf("error %q does not name the job", r.msg())
			}
			assertContains(t, r.out, tc.want...)
		})
	}
}
