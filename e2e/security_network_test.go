package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// nftflush builds the attacker's nftables tool (e2e/testdata/nftflush) as a static binary.
func nftflush(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "nftflush")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/nftflush")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build nftflush: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSecuritySandboxCannotLiftItsEgressCapture(t *testing.T) {
	s, _, plain := networkStack(t)
	id := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab")})
	mode := uint32(0o755)
	s.write(t, id, "/tmp/nftflush", nftflush(t), &mode)
	for _, tc := range []struct{ name, cmd, want string }{
		{"flush the nftables rules", `/tmp/nftflush; echo "exit=$?"`, "operation not permitted"},
		{"drop the local route", `ip route del local default dev lo table local 2>&1; echo "exit=$?"`, "exit=2"},
		{"add a route of its own", `ip route add 10.0.0.0/8 dev lo 2>&1; echo "exit=$?"`, "exit=2"},
		{"take loopback down", `ip link set lo down 2>&1; echo "exit=$?"`, "exit=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.ToLower(s.sh(t, id, tc.cmd)); !strings.Contains(got, tc.want) {
				t.Fatalf("%s: %q, want %q", tc.cmd, got, tc.want)
			}
		})
	}
	// The capture still holds: a host no rule names is refused.
	if got := s.sh(t, id, `env -u http_proxy -u HTTP_PROXY wget -O- http://plain.example.com/ 2>&1; echo "exit=$?"`); !strings.Contains(got, "403") {
		t.Fatalf("after the attempts, a denied host answered %q", got)
	}
	if len(plain.got()) != 0 {
		t.Fatal("a denied host was reached")
	}
}

func TestSecuritySandboxCannotReachTheHostDirectly(t *testing.T) {
	s, _, _ := networkStack(t)
	id := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab")})
	hostPort := s.hosts[0].Addr[strings.LastIndex(s.hosts[0].Addr, ":")+1:]
	if _, err := strconv.Atoi(hostPort); err != nil {
		t.Fatal(err)
	}
	sockDir := filepath.Join(s.hosts[0].DataDir, "sock")
	for _, tc := range []struct{ name, cmd, want string }{
		// 127.0.0.1 inside is the sandbox's own loopback: the host API is not there.
		{"the host API on loopback", `env -u http_proxy -u HTTP_PROXY wget -q -O- -T 3 http://127.0.0.1:` + hostPort + `/ 2>&1; echo "exit=$?"`, "exit=1"},
		// Asked of the proxy by name, loopback is refused whatever the rules.
		{"the host API through the proxy", `env -u NO_PROXY -u no_proxy wget -q -O- http://127.0.0.1:` + hostPort + `/ 2>&1; echo "exit=$?"`, "403"},
		// No socket of the host's (the supervisors', the proxy's) has a path in the sandbox.
		{"the host's socket dir", `ls ` + sockDir + ` 2>&1; find / -xdev -type s 2>/dev/null | wc -l`, "no such file"},
		{"a socket to write to", `find / -xdev -type s 2>/dev/null | wc -l`, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.ToLower(s.sh(t, id, tc.cmd)); !strings.Contains(got, tc.want) {
				t.Fatalf("%s: %q, want %q", tc.cmd, got, tc.want)
			}
		})
	}
}

func TestSecurityPlaceholderSentElsewhereIsRefused(t *testing.T) {
	s, router, plain := networkStack(t)
	id := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab")})
	// api.anthropic.com is the harness's own host, so the request may go there, but the router
	// key's placeholder may not.
	got := s.sh(t, id, `wget -q -O- --header "x-api-key: $ANTHROPIC_AUTH_TOKEN" http://api.anthropic.com/ 2>&1; echo "exit=$?"`)
	if !strings.Contains(got, "403") {
		t.Fatalf("the placeholder sent to another host: %q, want a 403", got)
	}
	if len(plain.got()) != 0 || len(router.got()) != 0 {
		t.Fatalf("a request carrying the placeholder went out: %q %q", plain.got(), router.got())
	}
	// Fails when no net.connection event reports the refused placeholder.
	s.eventsUntil(t, id, func(events []*appv1.SessionEvent) bool {
		return slices.ContainsFunc(events, func(e *appv1.SessionEvent) bool {
			return strings.Contains(e.GetPayloadJson(), `"placeholder_refused":"lab/key"`)
		})
	}, "net.connection")
	s.noEventHolds(t, id, "sk-lab-real-key")
}
