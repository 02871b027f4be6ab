package profiles

import (
	"time"

	"github.com/hangar-dev/hangar/platform/opt"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/clock"
)

// record is a profile as Firestore stores it, always in the normalised form validation produces.
type record struct {
	ID   string `firestore:"id"`
	Name string `firestore:"name"`
	// NameKey is the lowercased name: the sort key and the key of the name's claim.
	NameKey           string            `firestore:"name_key"`
	Description       string            `firestore:"description"`
	Icon              string            `firestore:"icon"`
	ImageID           string            `firestore:"image_id"`
	IncludeUserTokens bool              `firestore:"include_user_tokens"`
	EnvVars           map[string]string `firestore:"env_vars"`
	Skills            []string          `firestore:"skills"`
	Network           networkRecord     `firestore:"network"`
	Secrets           []secretRecord    `firestore:"secrets"`
	// Harness, Model, Effort, Designation and ModelRouter are "" when unset.
	Harness           string        `firestore:"harness"`
	Model             string        `firestore:"model"`
	Effort            string        `firestore:"effort"`
	Designation       string        `firestore:"designation"`
	ModelRouter       string        `firestore:"model_router"`
	IntegrationGrants []grantRecord `firestore:"integration_grants"`
	Repos             []repoRecord  `firestore:"repos"`
	Apps              []appRecord   `firestore:"apps"`
	Archived          bool          `firestore:"archived"`
	CreatedBy         string        `firestore:"created_by"`
	CreatedAt         time.Time     `firestore:"created_at"`
	UpdatedAt         time.Time     `firestore:"updated_at"`
}

type networkRecord struct {
	Default           string   `firestore:"default"`
	AllowHosts        []string `firestore:"allow_hosts"`
	AllowHostPatterns []string `firestore:"allow_host_patterns"`
}

type secretRecord struct {
	Ref               string   `firestore:"ref"`
	EnvVar            string   `firestore:"env_var"`
	Mode              string   `firestore:"mode"`
	AllowHosts        []string `firestore:"allow_hosts"`
	AllowHostPatterns []string `firestore:"allow_host_patterns"`
}

type grantRecord struct {
	ConnectionID        string   `firestore:"connection_id"`
	Operation           string   `firestore:"operation"`
	ResourceConstraints []string `firestore:"resource_constraints"`
	CredentialScope     string   `firestore:"credential_scope"`
}

type repoRecord struct {
	Path      string        `firestore:"path"`
	RemoteURL string        `firestore:"remote_url"`
	Remote    *remoteRecord `firestore:"remote"`
}

type remoteRecord struct {
	Host  string `firestore:"host"`
	Owner string `firestore:"owner"`
	Name  string `firestore:"name"`
}

type appRecord struct {
	Name string `firestore:"name"`
	Port uint32 `firestore:"port"`
}

func (r record) proto() *appv1.Profile {
	p := &appv1.Profile{
		Id: r.ID, Name: r.Name, Description: r.Description, Icon: r.Icon, ImageId: r.ImageID,
		IncludeUserTokens: r.IncludeUserTokens, EnvVars: r.EnvVars, Archived: r.Archived,
		CreatedAt: clock.Format(r.CreatedAt), UpdatedAt: clock.Format(r.UpdatedAt), Skills: r.Skills,
		Network: &appv1.ProfileNetwork{
			Default: r.Network.Default, AllowHosts: r.Network.AllowHosts, AllowHostPatterns: r.Network.AllowHostPatterns,
		},
		Harness: opt.String(r.Harness), Model: opt.String(r.Model), Effort: opt.String(r.Effort),
		Designation: opt.String(r.Designation), ModelRouter: opt.String(r.ModelRouter),
	}
	for _, s := range r.Secrets {
		p.Secrets = append(p.Secrets, &appv1.ProfileSecret{
			Ref: s.Ref, EnvVar: s.EnvVar, Mode: s.Mode, AllowHosts: s.AllowHosts, AllowHostPatterns: s.AllowHostPatterns,
		})
	}
	for _, g := range r.IntegrationGrants {
		p.IntegrationGrants = append(p.IntegrationGrants, &appv1.ProfileIntegrationGrant{
			ConnectionId: g.ConnectionID, Operation: g.Operation,
			ResourceConstraints: g.ResourceConstraints, CredentialScope: g.CredentialScope,
		})
	}
	for _, repo := range r.Repos {
		p.Repos = append(p.Repos, &appv1.ProfileRepo{Path: repo.Path, RemoteUrl: repo.RemoteURL, Remote: repo.Remote.proto()})
	}
	p.Apps = r.appsProto()
	return p
}

func (r record) appsProto() []*appv1.SessionApp {
	var out []*appv1.SessionApp
	for _, a := range r.Apps {
		out = append(out, &appv1.SessionApp{Name: a.Name, Port: a.Port})
	}
	return out
}

func (r record) snapshot() *appv1.ProfileSnapshot {
	return &appv1.ProfileSnapshot{
		Id: r.ID, Name: r.Name, ImageId: r.ImageID,
		Harness: opt.String(r.Harness), Model: opt.String(r.Model), Effort: opt.String(r.Effort),
		ModelRouter: opt.String(r.ModelRouter), UpdatedAt: clock.Format(r.UpdatedAt),
		Apps: r.appsProto(), IncludeUserTokens: r.IncludeUserTokens,
	}
}

// discovered shows a configured repo the way discovery reports one found in an image. A profile
// records a single remote per repo, the one a clone calls "origin".
func (repo repoRecord) discovered() *appv1.DiscoveredRepo {
	d := &appv1.DiscoveredRepo{Path: repo.Path}
	if repo.RemoteURL != "" {
		d.Remotes = []*appv1.DiscoveredRemote{{Name: "origin", Url: repo.RemoteURL, Parsed: repo.Remote.proto()}}
	}
	return d
}

func (rr *remoteRecord) proto() *appv1.ProfileRepoRemote {
	if rr == nil {
		return nil
	}
	return &appv1.ProfileRepoRemote{Host: rr.Host, Owner: rr.Owner, Name: rr.Name}
}
