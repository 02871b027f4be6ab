package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

func newFleetCmd() *cobra.Command {
	return newClientGroup("fleet", "Show the sandbox hosts, cordon, drain and evacuate them (admin only)",
		newFleetListCmd, newFleetGetCmd, newFleetCordonCmd, newFleetUncordonCmd, newFleetDrainCmd, newFleetEvacuateCmd, newFleetJobCmd)
}

func newFleetListCmd(f *clientFlags) *cobra.Command {
	return clientCmd(f, "list", "List the sandbox hosts", cobra.NoArgs, func(c *apiClient, _ *cobra.Command, _ []string) error {
		return send(c, c.fleet.ListHosts, &appv1.ListHostsRequest{}, func(w io.Writer, resp *appv1.ListHostsResponse) {
			header := []string{"ID", "STATE", "ZONE", "SANDBOXES", "MEMORY BOOKED", "HEARTBEAT", "SESSIONS", "ADDRESS"}
			table(w, header, resp.GetHosts(), func(h *appv1.SandboxHost) []string {
				return []string{h.GetId(), h.GetState(), h.GetZone(),
					fmt.Sprintf("%d/%d", h.GetUse().GetSandboxes(), h.GetCapacity().GetSandboxes()),
					fmt.Sprintf("%d/%d MiB", h.GetUse().GetMemoryBookedBytes()>>20, h.GetCapacity().GetMemoryBookableBytes()>>20),
					fmt.Sprintf("%.0fs ago", h.GetHeartbeatAgeSeconds()), sessionCounts(h.GetSessionsByState()), h.GetAddress()}
			})
		})
	})
}

// sessionCounts is "running=2 idle=1", by state name.
func sessionCounts(m map[string]int32) string {
	parts := make([]string, 0, len(m))
	for state, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", state, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func newFleetGetCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "get HOST", "Show one host: capacity, use, warm pool, cached images, sessions", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.fleet.GetHost, &appv1.GetHostRequest{HostId: id}, nil)
	})
}

func newFleetCordonCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "cordon HOST", "Stop new placements on a host; its running sessions stay", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.fleet.CordonHost, &appv1.CordonHostRequest{HostId: id}, func(w io.Writer, resp *appv1.CordonHostResponse) {
			fmt.Fprintf(w, "host %s is %s: no new sessions go to it\n", id, resp.GetHost().GetState())
		})
	})
}

func newFleetUncordonCmd(f *clientFlags) *cobra.Command {
	return idCmd(f, "uncordon HOST", "Let a cordoned or drained host take sessions again", func(c *apiClient, _ *cobra.Command, id string) error {
		return send(c, c.fleet.UncordonHost, &appv1.UncordonHostRequest{HostId: id}, func(w io.Writer, resp *appv1.UncordonHostResponse) {
			fmt.Fprintf(w, "host %s is %s\n", id, resp.GetHost().GetState())
		})
	})
}

func newFleetDrainCmd(f *clientFlags) *cobra.Command {
	var follow, force bool
	cmd := idCmd(f, "drain HOST [--follow] [--force]", "Cordon a host and move every session off it", func(c *apiClient, _ *cobra.Command, id string) error {
		resp, err := call(c, c.fleet.DrainHost, &appv1.DrainHostRequest{HostId: id, Force: force})
		if err != nil {
			return err
		}
		return showFleetJob(c, resp.GetJob(), follow)
	})
	cmd.Flags().BoolVar(&follow, "follow", false, "print the drain's progress until it ends")
	cmd.Flags().BoolVar(&force, "force", false, "evict a session whose fresh checkpoint fails back to its last one (its changes since are lost)")
	return cmd
}

func newFleetEvacuateCmd(f *clientFlags) *cobra.Command {
	var follow bool
	cmd := idCmd(f, "evacuate HOST [--follow]", "Resume a lost host's sessions on other hosts from their last checkpoints", func(c *apiClient, _ *cobra.Command, id string) error {
		resp, err := call(c, c.fleet.EvacuateHost, &appv1.EvacuateHostRequest{HostId: id})
		if err != nil {
			return err
		}
		return showFleetJob(c, resp.GetJob(), follow)
	})
	cmd.Flags().BoolVar(&follow, "follow", false, "print the evacuation's progress until it ends")
	return cmd
}

func newFleetJobCmd(f *clientFlags) *cobra.Command {
	var follow bool
	cmd := idCmd(f, "job ID [--follow]", "Show a drain or evacuation job", func(c *apiClient, _ *cobra.Command, id string) error {
		resp, err := call(c, c.fleet.GetFleetJob, &appv1.GetFleetJobRequest{JobId: id})
		if err != nil {
			return err
		}
		return showFleetJob(c, resp.GetJob(), follow)
	})
	cmd.Flags().BoolVar(&follow, "follow", false, "print the job's progress until it ends")
	return cmd
}

// showFleetJob prints a job, or with follow a line each time its counts change until it ends;
// a failed job is the command's failure.
func showFleetJob(c *apiClient, job *appv1.FleetJob, follow bool) error {
	if !follow || c.json || c.quiet {
		return c.show(&appv1.GetFleetJobResponse{Job: job}, func(w io.Writer) { record(w, job) })
	}
	last := ""
	for {
		if line := fleetJobLine(job); line != last {
			fmt.Fprintln(c.out, line)
			last = line
		}
		if job.GetState() != "running" {
			break
		}
		select {
		case <-c.unbounded.Done():
			return c.unbounded.Err()
		case <-time.After(followEvery):
		}
		resp, err := c.fleet.GetFleetJob(c.unbounded, connect.NewRequest(&appv1.GetFleetJobRequest{JobId: job.GetId()}))
		if err != nil {
			return err
		}
		job = resp.Msg.GetJob()
	}
	for _, f := range job.GetFailures() {
		fmt.Fprintln(c.out, "failed: "+f)
	}
	fmt.Fprintln(c.out, job.GetMessage())
	if job.GetState() != "succeeded" {
		return errors.New(job.GetKind() + " job " + job.GetId() + " " + job.GetState())
	}
	return nil
}

// fleetJobLine is a job's counts in one line.
func fleetJobLine(j *appv1.FleetJob) string {
	done := j.GetMoved() + j.GetEvicted() + j.GetArchived() + j.GetFailed() + int32(len(j.GetWithoutCheckpoint()))
	return fmt.Sprintf("%s %s: %s, %d/%d sessions (moved %d, evicted %d, archived %d, failed %d, no checkpoint %d)",
		j.GetKind(), j.GetHostId(), j.GetState(), done, j.GetTotal(), j.GetMoved(), j.GetEvicted(), j.GetArchived(), j.GetFailed(), len(j.GetWithoutCheckpoint()))
}
