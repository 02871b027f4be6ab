package egress_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/platform/egress"
)

// An operator's allow entries open private destinations (a model gateway) to sandboxes, but
// never what would hand a sandbox the host or the cloud's credentials: the host's own
// addresses, link-local and metadata servers, whatever is listed; loopback only on a listed
// port. Every refusal names the setting.
func TestSandboxPolicyOpensListedGatewaysAndNeverTheHostOrMetadata(t *testing.T) {
	t.Parallel()
	const setting = "HANGAR_SANDBOX_EGRESS_ALLOW"
	own := netip.MustParseAddr("192.0.2.10")
	cases := []struct {
		name    string
		entries []string
		host    string // "" : the address's literal
		addr    string
		// want is "" for allowed, else what the refusal says.
		want string
	}{
		{"a private gateway in a listed prefix", []string{"10.0.0.0/8"}, "", "10.1.2.3:4000", ""},
		{"a private gateway by its listed name", []string{"litellm.corp.internal"}, "litellm.corp.internal", "10.1.2.3:4000", ""},
		{"a private address no entry lists", []string{"10.9.0.0/16"}, "", "10.1.2.3:4000", "reaches only when the operator lists it in " + setting},
		{"a listed gateway on a port its entry does not name", []string{"10.1.2.3:4000"}, "", "10.1.2.3:4001", "lists it in " + setting},
		{"loopback on the listed port", []string{"127.0.0.2:8443"}, "", "127.0.0.2:8443", ""},
		{"loopback by a listed name with its port", []string{"gw.local:8443"}, "gw.local", "127.0.0.2:8443", ""},
		{"loopback by a listed prefix, which names no port", []string{"127.0.0.0/8"}, "", "127.0.0.2:8443", "opened only by an entry with its port"},
		{"loopback by a listed address without a port", []string{"127.0.0.2"}, "", "127.0.0.2:8443", "opened only by an entry with its port"},
		{"loopback by a listed name without a port", []string{"gw.local"}, "gw.local", "127.0.0.2:8443", "opened only by an entry with its port"},
		{"the host's own address, though listed exactly", []string{"192.0.2.10:80", "192.0.2.10"}, "", "192.0.2.10:80", "own network interfaces, which no sandbox reaches, whatever " + setting},
		{"the host's own address by a listed name", []string{"me.corp.internal"}, "me.corp.internal", "192.0.2.10:80", "own network interfaces"},
		{"the metadata server, though listed", []string{"169.254.169.254", "169.254.0.0/16"}, "", "169.254.169.254:80", "link-local address, where cloud metadata servers answer, which no sandbox reaches"},
		{"a link-local address in a listed wide prefix", []string{"0.0.0.0/0"}, "", "169.254.1.1:80", "link-local"},
		{"IPv6 link-local, though listed", []string{"fe80::/10"}, "", "[fe80::1]:80", "link-local"},
		{"AWS's IPv6 metadata server, though listed", []string{"fd00::/8"}, "", "[fd00:ec2::254]:80", "cloud metadata server's address"},
		{"Alibaba's metadata server, though listed", []string{"100.64.0.0/10"}, "", "100.100.100.200:80", "cloud metadata server's address"},
		{"metadata through NAT64, though listed", []string{"64:ff9b::/96"}, "", "[64:ff9b::a9fe:a9fe]:80", "carrying 169.254.169.254"},
		{"metadata through 6to4, though listed", []string{"2002::/16"}, "", "[2002:a9fe:a9fe::1]:80", "carrying 169.254.169.254"},
		{"this network's address, which is this host, though listed", []string{"0.0.0.0/8"}, "", "0.0.0.0:80", `"this network"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := egress.WithHostAddrs(egress.MustParse(tc.entries...), own).ForSandboxes(setting)
			a := netip.MustParseAddrPort(tc.addr)
			host := tc.host
			if host == "" {
				host = a.Addr().String()
			}
			err := p.CheckAddr(host, a)
			if tc.host == "" {
				// An IP literal is refused before any dial, as by the proxy's decision.
				if herr := p.CheckHost(host, a.Port()); (herr == nil) != (err == nil) {
					t.Fatalf("CheckHost %v, CheckAddr %v: they disagree", herr, err)
				}
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("allowed, want a refusal")
			case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), setting)):
				t.Fatalf("refusal %q, want it to say %q and name %s", err, tc.want, setting)
			}
		})
	}

	t.Run("metadata server names, though listed", func(t *testing.T) {
		t.Parallel()
		p := egress.MustParse("metadata.google.internal", "metadata").ForSandboxes(setting)
		for _, name := range []string{"metadata.google.internal", "metadata", "Metadata.Google.Internal."} {
			if err := p.CheckHost(name, 80); err == nil || !strings.Contains(err.Error(), "no sandbox reaches") {
				t.Errorf("%s: %v, want the metadata refusal", name, err)
			}
		}
	})
	t.Run("the server's own policy still opens what it lists", func(t *testing.T) {
		t.Parallel()
		p := egress.WithHostAddrs(egress.MustParse("192.0.2.10", "127.0.0.0/8"), own)
		for _, a := range []string{"192.0.2.10:80", "127.0.0.2:8443"} {
			if err := p.CheckAddr("x", netip.MustParseAddrPort(a)); err != nil {
				t.Errorf("%s: %v", a, err)
			}
		}
	})
}
