package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

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
