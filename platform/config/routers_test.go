package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseModelRouters(t *testing.T) {
	valid := `{"id":"openrouter","label":"OpenRouter","base_url":"https://openrouter.ai/api/v1","protocols":["openai-chat"],"credential_secret":"org/openrouter-key","egress_hosts":["openrouter.ai"],"default_model":"anthropic/claude-sonnet-4"}`
	tests := []struct {
		name    string
		json    string
		wantErr string
	}{
		{"https router", `[` + valid + `]`, ""},
		{"http to loopback for tests", `[{"id":"local","base_url":"http://127.0.0.1:8080/v1"},{"id":"local6","base_url":"http://[::1]:8080"},{"id":"lh","base_url":"http://localhost:9/api"}]`, ""},
		{"none", `[]`, ""},
		{"duplicate id", `[` + valid + `,` + valid + `]`, `id "openrouter" is used twice`},
		{"id not a slug", `[{"id":"Open Router","base_url":"https://openrouter.ai/api/v1"}]`, "id: want a slug"},
		{"http to a public host", `[{"id":"r","base_url":"http://openrouter.ai/api/v1"}]`, "http is allowed only to loopback"},
		{"other scheme", `[{"id":"r","base_url":"ftp://openrouter.ai/"}]`, "want an https URL"},
		{"no base url", `[{"id":"r"}]`, "has no host"},
		{"GCP metadata", `[{"id":"r","base_url":"http://metadata.google.internal/computeMetadata/v1"}]`, "cloud metadata"},
		{"GCP metadata over https, trailing dot", `[{"id":"r","base_url":"https://Metadata.Google.Internal./v1"}]`, "cloud metadata"},
		{"link-local IPv4", `[{"id":"r","base_url":"https://169.254.169.254/latest"}]`, "cloud metadata"},
		{"AWS IPv6 metadata", `[{"id":"r","base_url":"https://[fd00:ec2::254]/latest"}]`, "cloud metadata"},
		{"IPv4-mapped link-local", `[{"id":"r","base_url":"https://[::ffff:169.254.169.254]/"}]`, "cloud metadata"},
		{"metadata egress host", `[{"id":"r","base_url":"https://openrouter.ai/api/v1","egress_hosts":["169.254.169.254:80"]}]`, "egress_hosts"},
		{"secret itself instead of its name", `[{"id":"r","base_url":"https://openrouter.ai/api/v1","credential_secret":"sk-or-v1-0123456789abcdef"}]`, "looks like an API key"},
		{"credentials in the url", `[{"id":"r","base_url":"https://user:pw@openrouter.ai/api/v1"}]`, "want no credentials"},
		{"misspelt field", `[{"id":"r","baseurl":"https://openrouter.ai/api/v1"}]`, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := ParseModelRouters([]byte(tt.json))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					if r.Label == "" {
						t.Errorf("router %s has no label", r.ID)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestFromEnvReadsModelRouters(t *testing.T) {
	list := `[{"id":"openrouter","base_url":"https://openrouter.ai/api/v1"}]`
	file := filepath.Join(t.TempDir(), "routers.json")
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    int
		wantErr string
	}{
		{"none by default", nil, 0, ""},
		{"inline", map[string]string{envModelRouters: list}, 1, ""},
		{"file", map[string]string{envModelRoutersFile: file}, 1, ""},
		{"both", map[string]string{envModelRouters: list, envModelRoutersFile: file}, 0, "not both"},
		{"invalid", map[string]string{envModelRouters: `[{"id":"r","base_url":"http://169.254.169.254/"}]`}, 0, envModelRouters},
		{"missing file", map[string]string{envModelRoutersFile: file + ".missing"}, 0, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{envModelRouters, envModelRoutersFile} {
				t.Setenv(k, "")
				_ = os.Unsetenv(k)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := FromEnv()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.ModelRouters) != tt.want {
				t.Errorf("got %d routers, want %d", len(c.ModelRouters), tt.want)
			}
		})
	}
	if len(Default().ModelRouters) != 0 {
		t.Error("Default configures routers")
	}
}
