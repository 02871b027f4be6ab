package runs

import (
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/opt"
)

// Brief is the run as lists show it.
func (r *Run) Brief() *appv1.AutomationRunBrief {
	return &appv1.AutomationRunBrief{
		Id: r.ID, AutomationId: r.AutomationID, Version: int32(r.Version), Status: string(r.Status),
		Error: opt.String(r.Error), TriggerSource: r.TriggerSource, EventKey: opt.String(r.EventKey),
		DeliveryKey: opt.String(r.DeliveryKey), DryRun: r.DryRun, StartedAt: clock.FormatPtr(r.StartedAt),
		EndedAt: clock.FormatPtr(r.EndedAt), CreatedAt: clock.Format(r.CreatedAt), InstanceId: r.InstanceID,
	}
}

// ToProto is the whole run with its steps.
func (r *Run) ToProto() *appv1.AutomationRun {
	out := &appv1.AutomationRun{Brief: r.Brief(), TriggerJson: r.Trigger, SessionIds: r.SessionIDs}
	for _, s := range r.Steps {
		out.Steps = append(out.Steps, &appv1.AutomationStepRun{
			BlockId: s.BlockID, Attempt: int32(s.Attempt), Status: string(s.Status),
			InputsJson: s.Inputs, OutputsJson: s.Outputs, Error: opt.String(s.Error),
			SessionId: opt.String(s.SessionID), StartedAt: clock.Format(s.StartedAt), EndedAt: clock.FormatPtr(s.EndedAt),
		})
	}
	return out
}

// ToProto is the instance as the API shows it.
func (in *Instance) ToProto() *appv1.AutomationInstance {
	return &appv1.AutomationInstance{
		Id: in.ID, AutomationId: in.AutomationID, Key: in.Key, Status: in.Status, InputsJson: in.Inputs,
		OpenedBy: in.OpenedBy, OpenedAt: clock.Format(in.OpenedAt), ClosedAt: clock.FormatPtr(in.ClosedAt),
		CloseReason: opt.String(in.CloseReason),
	}
}

// ToProto is the handle as the API shows it: "name=value".
func (h Handle) ToProto() *appv1.InstanceHandle {
	return &appv1.InstanceHandle{Handle: h.Name + "=" + h.Value, WrittenBy: h.WrittenBy, CreatedAt: clock.Format(h.CreatedAt)}
}

// ToProto is the drop as the API shows it.
func (d Drop) ToProto() *appv1.AutomationDropBrief {
	return &appv1.AutomationDropBrief{
		EntrypointId: d.EntrypointID, EventKey: d.EventKey, Reason: d.Reason, Detail: d.Detail,
		DroppedAt: clock.Format(d.DroppedAt),
	}
}

// ToProto is the sample as the API shows it.
func (s Sample) ToProto() *appv1.EventSample {
	return &appv1.EventSample{Id: s.ID, EventKey: s.EventKey, PayloadJson: s.Payload, ReceivedAt: clock.Format(s.ReceivedAt)}
}
