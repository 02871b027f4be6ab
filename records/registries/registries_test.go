package registries_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/records/registries"
)

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*registries.Store, *firestore.Client) {
	t.Helper()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	return registries.New(db, sealer, func() time.Time { return t0 }), db
}

func TestNormalHostTakesHostsAndRefusesURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, host, want, wantErr string
	}{
		{name: "a name", host: "ghcr.io", want: "ghcr.io"},
		{name: "upper case and spaces", host: " GHCR.IO ", want: "ghcr.io"},
		{name: "a port", host: "registry.example.com:5000", want: "registry.example.com:5000"},
		{name: "an IP address and port", host: "127.0.0.1:5000", want: "127.0.0.1:5000"},
		{name: "a bracketed IPv6 address and port", host: "[::1]:5000", want: "[::1]:5000"},
		{name: "docker.io, as references name it", host: "docker.io", want: "index.docker.io"},
		{name: "empty", host: "", wantErr: "is required"},
		{name: "a scheme", host: "https://ghcr.io", wantErr: "without a scheme"},
		{name: "a path", host: "ghcr.io/org/repo", wantErr: "without a path"},
		{name: "a query", host: "ghcr.io?x=1", wantErr: "without a path"},
		{name: "credentials", host: "user:pw@ghcr.io", wantErr: "must not carry credentials"},
		{name: "a bad port", host: "ghcr.io:99999", wantErr: "port from 1 to 65535"},
		{name: "a port that is not a number", host: "ghcr.io:http", wantErr: "port from 1 to 65535"},
		{name: "an unbracketed IPv6 address", host: "::1", wantErr: "bracket an IPv6"},
		{name: "an underscore", host: "my_registry.example.com", wantErr: "DNS name"},
		{name: "an empty label", host: "ghcr..io", wantErr: "DNS name"},
		{name: "too long", host: strings.Repeat("a.", 200) + "io", wantErr: "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := registries.NormalHost("host", tc.host)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NormalHost(%q) = %q, %v; want an error saying %q", tc.host, got, err, tc.wantErr)
				}
				testenv.WantCode(t, err, connect.CodeInvalidArgument)
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NormalHost(%q) = %q, %v; want %q", tc.host, got, err, tc.want)
			}
		})
	}
}

func TestAddRefusesBadAuthNamingTheField(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	for _, tc := range []struct {
		name string
		add  registries.Add
		want []string
	}{
		{"no kind", registries.Add{Host: "ghcr.io"}, []string{"auth"}},
		{"static without a username or password", registries.Add{Host: "ghcr.io", Kind: registries.Static}, []string{"static.username", "static.password"}},
		{"a username with a colon", registries.Add{Host: "ghcr.io", Kind: registries.Static, Principal: "a:b", Password: "pw"}, []string{"static.username"}},
		{"a password over the limit", registries.Add{Host: "ghcr.io", Kind: registries.Static, Principal: "u", Password: strings.Repeat("x", registries.MaxPasswordBytes+1)}, []string{"static.password"}},
		{"a service account that is not one", registries.Add{Host: "europe-docker.pkg.dev", Kind: registries.WorkloadIdentity, Principal: "me@example.com"}, []string{"workload_identity.impersonate_sa"}},
		{"a role that is not an ARN", registries.Add{Host: "123456789012.dkr.ecr.eu-west-1.amazonaws.com", Kind: registries.CloudRegistry, Principal: "ecr-pull"}, []string{"cloud_registry.assume_role_arn"}},
		{"a password on an anonymous registry", registries.Add{Host: "ghcr.io", Kind: registries.Anonymous, Password: "pw"}, []string{"auth"}},
		{"a bad host and a missing password", registries.Add{Host: "https://ghcr.io", Kind: registries.Static, Principal: "u"}, []string{"host", "static.password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Add(t.Context(), tc.add)
			if got := testenv.ViolatedFields(t, err); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("violated %v, want %v (%v)", got, tc.want, err)
			}
		})
	}
}

func TestAddListCredentialsDelete(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	for _, a := range []registries.Add{
		{Host: "GHCR.io", Kind: registries.Static, Principal: "octocat", Password: "ghp_secret", By: "user_admin"},
		{Host: "europe-docker.pkg.dev", Kind: registries.WorkloadIdentity, Principal: "puller@proj.iam.gserviceaccount.com"},
		{Host: "123456789012.dkr.ecr.eu-west-1.amazonaws.com", Kind: registries.CloudRegistry, Principal: "arn:aws:iam::123456789012:role/ecr-pull"},
		{Host: "quay.io", Kind: registries.Anonymous},
	} {
		sum, err := s.Add(ctx, a)
		if err != nil {
			t.Fatalf("add %s: %v", a.Host, err)
		}
		if !strings.HasPrefix(sum.ID, registries.IDPrefix+"_") || sum.Kind != a.Kind || !sum.CreatedAt.Equal(t0) {
			t.Fatalf("add %s: %+v", a.Host, sum)
		}
	}
	_, err := s.Add(ctx, registries.Add{Host: "ghcr.io", Kind: registries.Anonymous})
	testenv.WantCode(t, err, connect.CodeAlreadyExists)

	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, r := range list {
		hosts = append(hosts, r.Host+"="+string(r.Kind)+":"+r.Principal)
	}
	want := "123456789012.dkr.ecr.eu-west-1.amazonaws.com=cloud_registry:arn:aws:iam::123456789012:role/ecr-pull," +
		"europe-docker.pkg.dev=workload_identity:puller@proj.iam.gserviceaccount.com,ghcr.io=static:octocat,quay.io=anonymous:"
	if got := strings.Join(hosts, ","); got != want {
		t.Fatalf("list:\n%s\nwant:\n%s", got, want)
	}

	c, ok, err := s.Credentials(ctx, "ghcr.io")
	if err != nil || !ok || c.Principal != "octocat" || c.Password != "ghp_secret" {
		t.Fatalf("credentials: %+v %v %v", c, ok, err)
	}
	if _, ok, err := s.Credentials(ctx, "docker.io/../x"); ok || err != nil {
		t.Fatalf("a host that is no host: %v %v", ok, err)
	}
	if _, ok, err := s.Credentials(ctx, "registry.example.com"); ok || err != nil {
		t.Fatalf("an unknown host: %v %v", ok, err)
	}

	if _, err := s.Delete(ctx, "GHCR.IO"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Delete(ctx, "ghcr.io")
	testenv.WantCode(t, err, connect.CodeNotFound)
	_, err = s.Delete(ctx, "https://ghcr.io")
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
}

// The attack: someone who can read the database (a backup, a leaked export) reads a registry's
// password, or copies one registry's sealed password onto a host they control so that the
// keychain sends it there. Neither works: the document holds only the sealed bytes, bound to
// its host.
func TestSecurityRegistryPasswordIsSealedAndBoundToItsHost(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	const password = "registry-password-in-the-clear"
	for _, h := range []string{"ghcr.io", "attacker.example.com"} {
		if _, err := s.Add(ctx, registries.Add{Host: h, Kind: registries.Static, Principal: "u", Password: password + h}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := db.Collection(registries.Collection).Doc("ghcr.io").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := snap.Data()["sealed"].([]byte)
	if len(sealed) == 0 || bytes.Contains(sealed, []byte(password)) {
		t.Fatalf("the stored password is not sealed: %q", sealed)
	}
	for k, v := range snap.Data() {
		if s, ok := v.(string); ok && strings.Contains(s, password) {
			t.Fatalf("field %s holds the password", k)
		}
	}
	if _, err := db.Collection(registries.Collection).Doc("attacker.example.com").Update(ctx, []firestore.Update{{Path: "sealed", Value: sealed}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Credentials(ctx, "attacker.example.com"); err == nil {
		t.Fatal("a sealed password copied onto another host opened")
	}
}
