package config

import (
	"encoding/pem"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/egress"
)

func TestFromEnvReadsEgressAllowAndPrivateRegistries(t *testing.T) {
	loopback := netip.MustParseAddr("127.0.0.1")
	private := netip.MustParseAddr("10.1.2.3")
	tests := []struct {
		name               string
		allow, registries  string
		egressLoopback     bool // Egress opens 127.0.0.1
		registriesLoopback bool // Registries opens 127.0.0.1
		registriesPrivate  bool // Registries opens 10.1.2.3 for registry.internal
		wantErr            string
	}{
		{name: "nothing set opens nothing"},
		{name: "an egress entry opens both", allow: "127.0.0.0/8", egressLoopback: true, registriesLoopback: true},
		{name: "a private registry opens pulls only", registries: "registry.internal, 127.0.0.1", registriesLoopback: true, registriesPrivate: true},
		{name: "a bad egress entry", allow: "10.0.0.0/99", wantErr: "HANGAR_EGRESS_ALLOW"},
		{name: "a bad registry entry", registries: "user@registry", wantErr: "HANGAR_PRIVATE_REGISTRIES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HANGAR_EGRESS_ALLOW", tt.allow)
			t.Setenv("HANGAR_PRIVATE_REGISTRIES", tt.registries)
			c, err := FromEnv()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv = %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			opens := func(p egress.Policy, host string, a netip.Addr) bool {
				err := p.CheckAddr(host, netip.AddrPortFrom(a, 5000))
				if err != nil && !errors.Is(err, egress.ErrRefused) {
					t.Fatalf("CheckAddr: %v", err)
				}
				return err == nil
			}
			if got := opens(c.Egress, "x", loopback); got != tt.egressLoopback {
				t.Errorf("Egress opens loopback = %v", got)
			}
			if got := opens(c.Registries, "x", loopback); got != tt.registriesLoopback {
				t.Errorf("Registries opens loopback = %v", got)
			}
			if got := opens(c.Registries, "registry.internal", private); got != tt.registriesPrivate {
				t.Errorf("Registries opens registry.internal = %v", got)
			}
		})
	}
}

// The sandboxes' allow list and CA bundle are their own settings: HANGAR_EGRESS_ALLOW opens
// nothing to sandboxes, HANGAR_SANDBOX_EGRESS_ALLOW nothing to the server, and a CA file that
// is missing or holds no certificate is refused by its name.
func TestFromEnvReadsTheSandboxesEgressAllowAndCA(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert := testkit.UnstartedTLSServer(nil).TLS.Certificates[0].Certificate[0]
	good := write("ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})))
	gateway := netip.MustParseAddrPort("10.1.2.3:4000")
	for _, tc := range []struct {
		name, serverAllow, sandboxAllow, caFile, wantErr string
		sandboxOpens, serverOpens                        bool
	}{
		{name: "the sandboxes' entry opens the gateway to sandboxes only", sandboxAllow: "10.0.0.0/8", caFile: good, sandboxOpens: true},
		{name: "the server's entry opens nothing to sandboxes", serverAllow: "10.0.0.0/8", serverOpens: true},
		{name: "a bad entry", sandboxAllow: "10.0.0.0/99", wantErr: "HANGAR_SANDBOX_EGRESS_ALLOW"},
		{name: "a missing CA file", caFile: filepath.Join(dir, "none.pem"), wantErr: "HANGAR_SANDBOX_EGRESS_CA_FILE"},
		{name: "a CA file without a certificate", caFile: write("empty.pem", "not a certificate\n"), wantErr: "HANGAR_SANDBOX_EGRESS_CA_FILE"},
		{name: "a CA file whose certificate does not parse", caFile: write("bad.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), wantErr: "HANGAR_SANDBOX_EGRESS_CA_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HANGAR_EGRESS_ALLOW", tc.serverAllow)
			t.Setenv("HANGAR_SANDBOX_EGRESS_ALLOW", tc.sandboxAllow)
			t.Setenv("HANGAR_SANDBOX_EGRESS_CA_FILE", tc.caFile)
			c, err := FromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromEnv = %v, want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Host.SandboxEgress.CheckAddr("x", gateway) == nil; got != tc.sandboxOpens {
				t.Errorf("sandboxes reach the gateway = %v", got)
			}
			if got := c.Egress.CheckAddr("x", gateway) == nil; got != tc.serverOpens {
				t.Errorf("the server reaches the gateway = %v", got)
			}
			if (len(c.Host.SandboxEgressCA) > 0) != (tc.caFile != "") {
				t.Errorf("CA bundle %q", c.Host.SandboxEgressCA)
			}
		})
	}
}
