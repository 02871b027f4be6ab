package records

import (
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/opt"
)

// ToProto is the automation as the API shows it, with its current version.
func (r *AutomationRecord) ToProto() *appv1.Automation {
	return &appv1.Automation{
		Id: r.ID, Name: r.Name, Description: r.Description, Kind: r.Kind, BuiltinKey: opt.String(r.BuiltinKey),
		Enabled: r.Enabled, CurrentVersion: int32(r.CurrentVersion), InputsJson: r.InputsJSON,
		BlockOverridesJson: r.BlockOverridesJSON, SettingsJson: r.SettingsJSON, Archived: r.Archived, CreatedByUserId: opt.String(r.CreatedBy),
		NextFireAt: clock.FormatPtr(r.NextFireAt), LastFiredAt: clock.FormatPtr(r.LastFiredAt),
		DraftSessionId: opt.String(r.DraftSessionID), CreatedAt: clock.Format(r.CreatedAt),
		UpdatedAt: clock.Format(r.UpdatedAt), Version: r.Version.ToProto(),
	}
}

// ToProto is the version as the API shows it.
func (v *VersionRecord) ToProto() *appv1.AutomationVersion {
	return &appv1.AutomationVersion{
		AutomationId: v.AutomationID, Number: int32(v.Number), DefinitionJson: v.DefinitionJSON,
		CreatedByUserId: opt.String(v.CreatedBy), CreatedAt: clock.Format(v.CreatedAt),
	}
}
