package config

import (
	"strings"
	"testing"
	"time"
)

func TestFromEnvReadsTheResourceLimits(t *testing.T) {
	tests := []struct {
		name, env, value string
		got              func(Config) any
		want             any
		wantErr          string
	}{
		{"sandbox disk", "HANGAR_SANDBOX_DISK_BYTES", "1073741824", func(c Config) any { return c.Host.SandboxDiskBytes }, int64(1 << 30), ""},
		{"largest sandbox disk", "HANGAR_MAX_SANDBOX_DISK_BYTES", "21474836480", func(c Config) any { return c.Host.MaxSandboxDiskBytes }, int64(20 << 30), ""},
		{"image size", "HANGAR_MAX_IMAGE_BYTES", "5000000", func(c Config) any { return c.Host.MaxImageBytes }, int64(5_000_000), ""},
		{"sessions per user", "HANGAR_MAX_SESSIONS_PER_USER", "3", func(c Config) any { return c.Limits.MaxSessionsPerUser }, 3, ""},
		{"overcommit ratio", "HANGAR_MEMORY_OVERCOMMIT_RATIO", "1.5", func(c Config) any { return c.Host.MemoryOvercommitRatio }, 1.5, ""},
		{"zero disk", "HANGAR_SANDBOX_DISK_BYTES", "0", nil, nil, "HANGAR_SANDBOX_DISK_BYTES"},
		{"disk in words", "HANGAR_SANDBOX_DISK_BYTES", "10GiB", nil, nil, "positive whole number"},
		{"default disk over the largest", "HANGAR_MAX_SANDBOX_DISK_BYTES", "1073741824", nil, nil, "more than HANGAR_MAX_SANDBOX_DISK_BYTES"},
		{"zero sessions per user", "HANGAR_MAX_SESSIONS_PER_USER", "0", nil, nil, "HANGAR_MAX_SESSIONS_PER_USER"},
		{"zero ratio", "HANGAR_MEMORY_OVERCOMMIT_RATIO", "0", nil, nil, "HANGAR_MEMORY_OVERCOMMIT_RATIO"},
		{"NaN ratio", "HANGAR_MEMORY_OVERCOMMIT_RATIO", "NaN", nil, nil, "HANGAR_MEMORY_OVERCOMMIT_RATIO"},
		{"exec timeout ceiling under its prefix", "HANGAR_EXEC_TIMEOUT_MAX", "1h", func(c Config) any { return c.Limits.ExecTimeout.Max }, time.Hour, ""},
		{"no warm sandboxes", "HANGAR_WARM_SANDBOXES", "0", func(c Config) any { return c.Host.WarmSandboxes }, 0, ""},
		{"leading zero read in base 10", "HANGAR_MAX_SANDBOXES", "010", func(c Config) any { return c.Host.MaxSandboxes }, 10, ""},
		{"tasks page ceiling", "HANGAR_TASKS_PAGE_SIZE_MAX", "300", func(c Config) any { return c.Limits.Tasks.Max }, 300, ""},
		{"project", "HANGAR_PROJECT", "p1", func(c Config) any { return c.Project }, "p1", ""},
		{"project from Google Cloud's variable", "GOOGLE_CLOUD_PROJECT", "p2", func(c Config) any { return c.Project }, "p2", ""},
		{"hexadecimal sandboxes", "HANGAR_MAX_SANDBOXES", "0x10", nil, nil, "HANGAR_MAX_SANDBOXES=\"0x10\": want a whole number of at least 1"},
		{"negative warm sandboxes", "HANGAR_WARM_SANDBOXES", "-1", nil, nil, "want a whole number of at least 0"},
		{"negative exec timeout", "HANGAR_EXEC_TIMEOUT_DEFAULT", "-1s", nil, nil, "HANGAR_EXEC_TIMEOUT_DEFAULT"},
		{"empty heartbeat", "HANGAR_HEARTBEAT_INTERVAL", "", nil, nil, "want a duration such as 10s"},
		{"egress idle timeout", "HANGAR_EGRESS_IDLE_TIMEOUT", "90s", func(c Config) any { return c.Host.Egress.IdleTimeout }, 90 * time.Second, ""},
		{"egress idle timeout past its ceiling", "HANGAR_EGRESS_IDLE_TIMEOUT", "2h", nil, nil, "HANGAR_EGRESS_IDLE_TIMEOUT=2h0m0s: want a duration above 0 and at most 1h0m0s"},
		{"no egress idle timeout", "HANGAR_EGRESS_IDLE_TIMEOUT", "0s", nil, nil, "HANGAR_EGRESS_IDLE_TIMEOUT"},
		{"egress lifetime", "HANGAR_EGRESS_CONN_LIFETIME", "3h", func(c Config) any { return c.Host.Egress.Lifetime }, 3 * time.Hour, ""},
		{"egress lifetime past its ceiling", "HANGAR_EGRESS_CONN_LIFETIME", "25h", nil, nil, "at most 24h0m0s"},
		{"host connections from the descriptor limit", "HANGAR_EGRESS_MAX_CONNECTIONS", "0", func(c Config) any { return c.Host.Egress.MaxConnections }, 0, ""},
		{"connections per sandbox", "HANGAR_EGRESS_MAX_CONNECTIONS_PER_SANDBOX", "100", func(c Config) any { return c.Host.Egress.MaxPerSandbox }, 100, ""},
		{"no connections per sandbox", "HANGAR_EGRESS_MAX_CONNECTIONS_PER_SANDBOX", "0", nil, nil, "want a whole number of at least 1"},
		{"connection share", "HANGAR_EGRESS_MIN_CONNECTION_SHARE", "8", func(c Config) any { return c.Host.Egress.MinShare }, 8, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HANGAR_PROJECT", "") // empty is unset: GOOGLE_CLOUD_PROJECT's case reads it
			t.Setenv(tc.env, tc.value)
			c, err := FromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromEnv with %s=%s: %v, want an error saying %q", tc.env, tc.value, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(c); got != tc.want {
				t.Errorf("%s=%s read as %v, want %v", tc.env, tc.value, got, tc.want)
			}
		})
	}
}
