// Package fleetsvc serves FleetService, the admins' view of the sandbox hosts and their way to
// take one out of service: cordon it (no new placements), drain it (every session moved off,
// by checkpoint and resume on another host, or eviction) and evacuate a lost one (its sessions
// resumed elsewhere from their last checkpoints). The host states and their moves are
// records/fleet's table; drains and evacuations are jobs whose progress is a fleet_jobs record.
package fleetsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// Sessions is what FleetService needs of the session service.
type Sessions interface {
	// Relocate resumes an evicted or lost session on the best host that takes it, whoever owns
	// it, and answers with that host; unavailable when no host has room.
	Relocate(ctx context.Context, id string) (hostID string, err error)
}

// Deps is what the service needs.
type Deps struct {
	Hosts    *hostclient.Pool
	Store    *sessiondb.Store
	Sessions Sessions
	Log      *slog.Logger
}

// Service implements FleetService.
type Service struct {
	d     Deps
	fleet *fleet.Fleet
}

// New returns the service over d.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Service{d: d, fleet: d.Hosts.Fleet()}
}

// jobPrefix starts every fleet job id.
const jobPrefix = "fjob"

// onHost are the session states a drain or evacuation moves: those holding or getting a
// sandbox on the host, and lost ones, which it held when it died.
var onHost = append(slices.DeleteFunc(sessiondb.Statuses(), func(s sessiondb.Status) bool { return !s.Live() }), sessiondb.Lost)

// ListHosts returns every host, with its sessions counted by state.
func (s *Service) ListHosts(ctx context.Context, _ *connect.Request[appv1.ListHostsRequest]) (*connect.Response[appv1.ListHostsResponse], error) {
	hosts, err := s.fleet.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListHostsResponse{Hosts: make([]*appv1.SandboxHost, 0, len(hosts))}
	for _, h := range hosts {
		p, err := s.toProto(ctx, h)
		if err != nil {
			return nil, err
		}
		out.Hosts = append(out.Hosts, p)
	}
	return connect.NewResponse(out), nil
}

// GetHost returns one host.
func (s *Service) GetHost(ctx context.Context, req *connect.Request[appv1.GetHostRequest]) (*connect.Response[appv1.GetHostResponse], error) {
	h, err := s.host(ctx, req.Msg.GetHostId())
	if err != nil {
		return nil, err
	}
	p, err := s.toProto(ctx, h)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.GetHostResponse{Host: p}), nil
}

// CordonHost stops new placements on the host.
func (s *Service) CordonHost(ctx context.Context, req *connect.Request[appv1.CordonHostRequest]) (*connect.Response[appv1.CordonHostResponse], error) {
	p, err := s.move(ctx, req.Msg.GetHostId(), fleet.Cordoned, nil)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.CordonHostResponse{Host: p}), nil
}

// UncordonHost lets a cordoned, draining or drained host take sessions again. A lost host
// becomes ready only by registering again (a restart).
func (s *Service) UncordonHost(ctx context.Context, req *connect.Request[appv1.UncordonHostRequest]) (*connect.Response[appv1.UncordonHostResponse], error) {
	p, err := s.move(ctx, req.Msg.GetHostId(), fleet.Ready, func(h *fleet.Host) error {
		if h.State == fleet.Lost {
			return apierr.FailedPrecondition("host %s is lost; it becomes ready when it registers again", h.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.UncordonHostResponse{Host: p}), nil
}

// DrainHost moves the host to draining and starts the job moving its sessions off.
func (s *Service) DrainHost(ctx context.Context, req *connect.Request[appv1.DrainHostRequest]) (*connect.Response[appv1.DrainHostResponse], error) {
	id := req.Msg.GetHostId()
	if _, err := s.move(ctx, id, fleet.Draining, nil); err != nil {
		return nil, err
	}
	job, err := s.start(ctx, fleet.KindDrain, id, req.Msg.GetForce(), s.drain)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.DrainHostResponse{Job: jobProto(job)}), nil
}

// EvacuateHost marks a silent host lost and starts the job resuming its sessions elsewhere.
func (s *Service) EvacuateHost(ctx context.Context, req *connect.Request[appv1.EvacuateHostRequest]) (*connect.Response[appv1.EvacuateHostResponse], error) {
	id := req.Msg.GetHostId()
	_, err := s.move(ctx, id, fleet.Lost, func(h *fleet.Host) error {
		if h.State != fleet.Lost && s.fleet.Alive(h) {
			return apierr.FailedPrecondition("host %s heartbeat %s ago and is %s: it is not lost; drain it instead",
				h.ID, s.fleet.HeartbeatAge(h).Round(time.Second), h.State)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	job, err := s.start(ctx, fleet.KindEvacuate, id, false, s.evacuate)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.EvacuateHostResponse{Job: jobProto(job)}), nil
}

// GetFleetJob reports a job's progress.
func (s *Service) GetFleetJob(ctx context.Context, req *connect.Request[appv1.GetFleetJobRequest]) (*connect.Response[appv1.GetFleetJobResponse], error) {
	id := req.Msg.GetJobId()
	if err := ids.Lookup("job_id", "fleet job", jobPrefix, id); err != nil {
		return nil, err
	}
	j, err := s.fleet.Job(ctx, id)
	if errors.Is(err, fleet.ErrJobNotFound) {
		return nil, apierr.NotFound("fleet job", id)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.GetFleetJobResponse{Job: jobProto(j)}), nil
}

// host reads the host a request names.
func (s *Service) host(ctx context.Context, id string) (*fleet.Host, error) {
	if err := ids.Check("host_id", id); err != nil {
		return nil, err
	}
	h, err := s.fleet.Get(ctx, id)
	if errors.Is(err, fleet.ErrNotFound) {
		return nil, apierr.NotFound("host", id)
	}
	return h, err
}

// move moves the host a request names to state to, when the table and allow agree, and makes
// this instance's placements read the fleet afresh.
func (s *Service) move(ctx context.Context, id string, to fleet.State, allow func(*fleet.Host) error) (*appv1.SandboxHost, error) {
	if err := ids.Check("host_id", id); err != nil {
		return nil, err
	}
	h, err := s.fleet.Move(ctx, id, to, allow)
	var me *fleet.MoveError
	switch {
	case errors.Is(err, fleet.ErrNotFound):
		return nil, apierr.NotFound("host", id)
	case errors.As(err, &me):
		return nil, apierr.FailedPrecondition("%s", me.Error())
	case err != nil:
		return nil, err
	}
	s.d.Hosts.Forget()
	return s.toProto(ctx, h)
}

// toProto is h as the API shows it, with its sessions counted by state.
func (s *Service) toProto(ctx context.Context, h *fleet.Host) (*appv1.SandboxHost, error) {
	recs, err := s.d.Store.ListByHost(ctx, h.ID, onHost...)
	if err != nil {
		return nil, fmt.Errorf("sessions of host %s: %w", h.ID, err)
	}
	counts := map[string]int32{}
	for _, r := range recs {
		counts[string(r.Status)]++
	}
	u := h.Usage
	warm := &appv1.WarmPool{TargetPerImage: int32(u.WarmTarget), Ready: map[string]int32{}}
	for ref, n := range u.WarmReady {
		warm.Ready[ref] = int32(n)
	}
	return &appv1.SandboxHost{
		Id: h.ID, Address: h.Address, Version: h.Version, Zone: h.Zone, State: string(h.State),
		Capacity: &appv1.HostCapacity{Cpus: h.CPUs, MemoryBytes: h.MemoryBytes, MemoryBookableBytes: h.MemoryCapacityBytes,
			Sandboxes: int32(h.MaxSandboxes), DiskBytes: h.DiskBytes},
		Use: &appv1.HostUse{CpusBooked: u.CPUsBooked, MemoryBookedBytes: h.MemoryReservedBytes, MemoryUsedBytes: u.MemoryUsedBytes,
			Sandboxes: int32(h.Sandboxes), DiskUsedBytes: u.DiskUsedBytes},
		WarmPool: warm, CachedImages: u.CachedImages,
		StartedAt: h.StartedAt.UTC().Format(time.RFC3339Nano), HeartbeatAt: h.HeartbeatAt.UTC().Format(time.RFC3339Nano),
		HeartbeatAgeSeconds: s.fleet.HeartbeatAge(h).Seconds(), SessionsByState: counts,
	}, nil
}

func jobProto(j *fleet.Job) *appv1.FleetJob {
	p := &appv1.FleetJob{
		Id: j.ID, Kind: j.Kind, HostId: j.HostID, State: j.State, Force: j.Force,
		Total: int32(j.Total), Moved: int32(j.Moved), Evicted: int32(j.Evicted), Archived: int32(j.Archived), Failed: int32(j.Failed),
		WithoutCheckpoint: j.WithoutCheckpoint, Failures: j.Failures, Message: j.Message,
		CreatedAt: j.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
	if j.FinishedAt != nil {
		at := j.FinishedAt.UTC().Format(time.RFC3339Nano)
		p.FinishedAt = &at
	}
	return p
}
