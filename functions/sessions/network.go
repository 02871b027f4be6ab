package sessions

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"

	"google.golang.org/protobuf/proto"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
)

// PlaceholderPrefix starts every placeholder a sandbox holds in place of a secret the egress
// proxy injects.
const PlaceholderPrefix = "hangar-placeholder-"

// NewPlaceholder is a fresh placeholder: random, so that it names one secret of one session and
// nothing can be learned from it.
func NewPlaceholder() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return PlaceholderPrefix + hex.EncodeToString(b)
}

// Where the egress proxy injects each kind of secret a session's network carries: a request
// that carries a placeholder anywhere else is refused, so that no echo of the request hands the
// value back to the sandbox.

// APIKeySlots are a profile's proxy-mode secret's: an API key's usual places.
func APIKeySlots() []*hostv1.ProxySecretSlot { return ProtoSlots(egressproxy.APIKeySlots...) }

// BearerSlots are a model router's key's and an OAuth access token's.
func BearerSlots() []*hostv1.ProxySecretSlot { return ProtoSlots(egressproxy.BearerSlot) }

// GitSlots are a repository checkout's credential's, sent by git as Basic credentials.
func GitSlots() []*hostv1.ProxySecretSlot { return ProtoSlots(egressproxy.BasicSlot) }

// ProtoSlots are slots as the host takes them.
func ProtoSlots(slots ...egressproxy.Slot) []*hostv1.ProxySecretSlot {
	out := make([]*hostv1.ProxySecretSlot, len(slots))
	for i, s := range slots {
		out[i] = &hostv1.ProxySecretSlot{Header: s.Header, Scheme: s.Scheme, Query: s.Query}
	}
	return out
}

// addEgress opens a harness's egress in n.
func addEgress(n *hostv1.SandboxNetwork, e *abi.Egress) {
	if e == nil {
		return
	}
	n.AllowHosts = append(n.AllowHosts, e.AllowHosts...)
	n.AllowHostPatterns = append(n.AllowHostPatterns, e.AllowHostPatterns...)
}

// routerHosts are the hosts a model router is reached at: its base URL's and its egress_hosts.
func routerHosts(r *config.ModelRouter) []string {
	var hosts []string
	if u, err := url.Parse(r.BaseURL); err == nil && u.Hostname() != "" {
		h := u.Hostname()
		if p := u.Port(); p != "" {
			h = net.JoinHostPort(h, p)
		}
		hosts = append(hosts, h)
	}
	return append(hosts, r.EgressHosts...)
}

// TaskStart is what a task's profile adds to its session's start.
type TaskStart struct {
	Network *hostv1.SandboxNetwork
	Repos   []*hostv1.RepoCheckout
	// UserTokens is the profile's include_user_tokens: the task creator's own OAuth credential
	// of the provider the harness takes goes with the session, when they have one connected.
	UserTokens bool
	// ProfileOwner is who decides the profile's network: a harness's egress opens in the task's
	// session only if it is approved or theirs (harnesscatalog.Entry.EgressAppliesFor), never
	// because the task's creator registered it. "" allows approved egress only.
	ProfileOwner string
}

// MergeNetwork adds what extra allows and injects to n (nil n makes a new one).
func MergeNetwork(n, extra *hostv1.SandboxNetwork) *hostv1.SandboxNetwork {
	if n == nil {
		n = &hostv1.SandboxNetwork{}
	}
	if extra == nil {
		return n
	}
	n.DefaultAllow = n.DefaultAllow || extra.DefaultAllow
	n.AllowHosts = append(n.AllowHosts, extra.AllowHosts...)
	n.AllowHostPatterns = append(n.AllowHostPatterns, extra.AllowHostPatterns...)
	n.Secrets = append(n.Secrets, extra.Secrets...)
	return n
}

// sealNetwork seals a session's egress for its record: Resume on any host opens it.
func sealNetwork(s *seal.Sealer, id string, n *hostv1.SandboxNetwork) ([]byte, error) {
	b, err := proto.Marshal(n)
	if err != nil {
		return nil, err
	}
	return s.Seal(b, sessiondb.NetworkOwner(id))
}
