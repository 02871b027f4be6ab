package registryauth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/api/option"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/records/registries"
	"github.com/hangar-dev/hangar/records/registryauth"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

// fixture is a registry store, a keychain over it and an image cache that pulls with it.
type fixture struct {
	db     *firestore.Client
	sealer *seal.Sealer
	store  *registries.Store
	clock  *clock.Fake
	keys   *registryauth.Keychain
	cache  *images.Cache
}

func newFixture(t *testing.T, opts registryauth.Options) *fixture {
	t.Helper()
	testkit.RequireRoot(t, "image unpacking (chown, mknod, trusted.* xattrs)")
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	f := &fixture{db: db, sealer: sealer, clock: clock.NewFake(t0)}
	f.store = registries.New(db, sealer, f.clock.Now)
	opts.Clock = f.clock
	f.keys = registryauth.New(f.store, opts)
	var err error
	f.cache, err = images.New(t.TempDir(), images.WithRegistries(imagestest.Allow), images.WithKeychain(f.keys))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) add(t *testing.T, a registries.Add) {
	t.Helper()
	if _, err := f.store.Add(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// privateImage starts a registry that wants user and password and pushes a small image to it.
func privateImage(t *testing.T, user, password string, refused *atomic.Int32) (host, ref string) {
	t.Helper()
	host = imagestest.Registry(t, imagestest.BasicAuth(user, password, refused))
	img := imagestest.Image(t, imagestest.Layer(t, imagestest.File("etc/hello", "private\n", 0o644)))
	ref = imagestest.Push(t, host, "team/app", img, remote.WithAuth(&authn.Basic{Username: user, Password: password}))
	return host, ref
}

func TestPullsSignInWithTheStoredCredentials(t *testing.T) {
	t.Parallel()
	var refused atomic.Int32
	privateHost, privateRef := privateImage(t, "robot", "s3cret-registry-pw", &refused)
	openHost := imagestest.Registry(t)
	openRef := imagestest.Push(t, openHost, "team/open", imagestest.Image(t, imagestest.Layer(t, imagestest.File("etc/hello", "open\n", 0o644))))
	for _, tc := range []struct {
		name    string
		add     *registries.Add
		ref     string
		wantErr string
	}{
		{name: "the right password", add: &registries.Add{Host: privateHost, Kind: registries.Static, Principal: "robot", Password: "s3cret-registry-pw"}, ref: privateRef},
		{name: "a wrong password", add: &registries.Add{Host: privateHost, Kind: registries.Static, Principal: "robot", Password: "wrong"}, ref: privateRef,
			wantErr: "the registry answered 401 Unauthorized (UNAUTHORIZED): the credentials Hangar has for registry " + privateHost + " were refused, or it has none"},
		{name: "no credentials for a private registry", ref: privateRef,
			wantErr: "`hangar registries add " + privateHost + "`"},
		{name: "anonymous on an open registry", add: &registries.Add{Host: openHost, Kind: registries.Anonymous}, ref: openRef},
		{name: "no record for an open registry", ref: openRef},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, registryauth.Options{})
			if tc.add != nil {
				f.add(t, *tc.add)
			}
			img, err := f.cache.Pull(t.Context(), tc.ref)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("pull: %v\nwant an error saying %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret-registry-pw") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			if len(img.LowerDirs) != 1 {
				t.Fatalf("pulled %+v", img)
			}
		})
	}
	if refused.Load() == 0 {
		t.Fatal("the private registry never refused a request: the test proves nothing")
	}
}

// A registry deleted or added is picked up once the keychain's store read is older than
// Recheck, by a cache whose puller already holds the repository's transport.
func TestChangedRegistriesTakeEffectAfterRecheck(t *testing.T) {
	t.Parallel()
	host, ref := privateImage(t, "robot", "pw-1", nil)
	f := newFixture(t, registryauth.Options{Recheck: time.Minute})
	ctx := t.Context()
	if _, err := f.cache.Pull(ctx, ref); err == nil {
		t.Fatal("a pull without credentials worked")
	}
	f.add(t, registries.Add{Host: host, Kind: registries.Static, Principal: "robot", Password: "pw-1"})
	f.clock.Advance(2 * time.Minute)
	if _, err := f.cache.Pull(ctx, ref); err != nil {
		t.Fatalf("pull once the registry is added: %v", err)
	}
	if _, err := f.store.Delete(ctx, host); err != nil {
		t.Fatal(err)
	}
	f.add(t, registries.Add{Host: host, Kind: registries.Static, Principal: "robot", Password: "stale"})
	f.clock.Advance(2 * time.Minute)
	if _, err := f.cache.Pull(ctx, ref); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("pull with the replaced password: %v", err)
	}
}

// A registry fixed in this process (deleted and added again with the right password) is used by
// the next pull, before Recheck, whichever Store instance changed it: the API's store is not
// the pulling keychain's.
func TestARegistryFixedInThisProcessIsUsedAtOnce(t *testing.T) {
	t.Parallel()
	host, ref := privateImage(t, "robot", "pw-right", nil)
	f := newFixture(t, registryauth.Options{Recheck: time.Hour})
	api := registries.New(f.db, f.sealer, f.clock.Now)
	ctx := t.Context()
	f.add(t, registries.Add{Host: host, Kind: registries.Static, Principal: "robot", Password: "pw-wrong"})
	if _, err := f.cache.Pull(ctx, ref); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("pull with the wrong password: %v", err)
	}
	if _, err := api.Delete(ctx, host); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Add(ctx, registries.Add{Host: host, Kind: registries.Static, Principal: "robot", Password: "pw-right"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cache.Pull(ctx, ref); err != nil {
		t.Fatalf("pull right after the password was fixed: %v", err)
	}
}

// iamFake is a loopback fake of the IAM Credentials API's generateAccessToken.
type iamFake struct {
	url    string
	mints  atomic.Int32
	deny   atomic.Bool
	clock  *clock.Fake
	lastSA atomic.Value
}

// newIAMFake starts the fake; its tokens expire an hour after its clock's now, which the caller
// sets before the first call.
func newIAMFake(t *testing.T) *iamFake {
	f := &iamFake{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/"), ":generateAccessToken")
		if r.Method != http.MethodPost || !ok {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Scope    []string `json:"scope"`
			Lifetime string   `json:"lifetime"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Scope) != 1 || req.Scope[0] != "https://www.googleapis.com/auth/cloud-platform" {
			http.Error(w, `{"error":{"code":400,"message":"bad request","status":"INVALID_ARGUMENT"}}`, http.StatusBadRequest)
			return
		}
		f.lastSA.Store(name)
		w.Header().Set("Content-Type", "application/json")
		if f.deny.Load() {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"code":403,"message":"Permission 'iam.serviceAccounts.getAccessToken' denied","status":"PERMISSION_DENIED"}}`)
			return
		}
		f.mints.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"accessToken": "ya29.minted-token", "expireTime": f.clock.Now().Add(time.Hour).Format(time.RFC3339),
		})
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL + "/"
	return f
}

func TestWorkloadIdentityImpersonatesTheServiceAccountAndKeepsTheToken(t *testing.T) {
	t.Parallel()
	const sa = "puller@my-project.iam.gserviceaccount.com"
	host, ref := privateImage(t, "oauth2accesstoken", "ya29.minted-token", nil)
	iam := newIAMFake(t)
	f := newFixture(t, registryauth.Options{Google: []option.ClientOption{option.WithEndpoint(iam.url), option.WithoutAuthentication()}})
	c, cache := f.clock, f.cache
	iam.clock = c
	f.add(t, registries.Add{Host: host, Kind: registries.WorkloadIdentity, Principal: sa})
	ctx := t.Context()
	for range 2 {
		if _, err := cache.Pull(ctx, ref); err != nil {
			t.Fatalf("pull: %v", err)
		}
	}
	if n := iam.mints.Load(); n != 1 {
		t.Fatalf("%d tokens minted for two pulls within the token's life, want 1", n)
	}
	if got := iam.lastSA.Load(); got != "projects/-/serviceAccounts/"+sa {
		t.Fatalf("impersonated %v", got)
	}
	// Five minutes before the token expires it is replaced.
	c.Advance(56 * time.Minute)
	if _, err := cache.Pull(ctx, ref); err != nil {
		t.Fatalf("pull after the token aged: %v", err)
	}
	if n := iam.mints.Load(); n != 2 {
		t.Fatalf("%d tokens minted once the first neared its expiry, want 2", n)
	}
	// A refused impersonation says which registry and service account, and why.
	iam.deny.Store(true)
	c.Advance(2 * time.Hour)
	_, err := cache.Pull(ctx, ref)
	if err == nil || !strings.Contains(err.Error(), "registry "+host+" (workload_identity as "+sa+")") || !strings.Contains(err.Error(), "403") {
		t.Fatalf("pull with a refused impersonation: %v", err)
	}
}

// awsFake is a loopback fake of STS AssumeRole (the query protocol) and ECR
// GetAuthorizationToken (JSON 1.1), checking that each call is signed with the right keys.
type awsFake struct {
	url     string
	assumes atomic.Int32
	tokens  atomic.Int32
	// ecrKey is the access key ECR calls must be signed with.
	ecrKey string
}

const (
	baseKey     = "AKIDBASEEXAMPLE"
	assumedKey  = "ASIAASSUMEDEXAMPLE"
	ecrPassword = "ecr-password-from-the-token"
	roleARN     = "arn:aws:iam::123456789012:role/ecr-pull"
)

func newAWSFake(t *testing.T, ecrKey string) *awsFake {
	f := &awsFake{ecrKey: ecrKey}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		signedBy := func(key string) bool {
			return strings.Contains(r.Header.Get("Authorization"), "Credential="+key+"/")
		}
		if r.Header.Get("X-Amz-Target") == "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken" {
			if !signedBy(f.ecrKey) {
				w.Header().Set("Content-Type", "application/x-amz-json-1.1")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`)
				return
			}
			f.tokens.Add(1)
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			_, _ = fmt.Fprintf(w, `{"authorizationData":[{"authorizationToken":%q,"expiresAt":%d,"proxyEndpoint":"https://123456789012.dkr.ecr.eu-west-1.amazonaws.com"}]}`,
				base64.StdEncoding.EncodeToString([]byte("AWS:"+ecrPassword)), t0.Add(12*time.Hour).Unix())
			return
		}
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		if form.Get("Action") != "AssumeRole" || form.Get("RoleArn") != roleARN || form.Get("RoleSessionName") != "hangar-registry-pull" || !signedBy(baseKey) {
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>not authorized to assume</Message></Error><RequestId>r1</RequestId></ErrorResponse>`)
			return
		}
		f.assumes.Add(1)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>assumed-secret</SecretAccessKey>
      <SessionToken>assumed-session-token</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/ecr-pull/hangar-registry-pull</Arn>
      <AssumedRoleId>AROAEXAMPLE:hangar-registry-pull</AssumedRoleId>
    </AssumedRoleUser>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>r2</RequestId></ResponseMetadata>
</AssumeRoleResponse>`, assumedKey, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func TestCloudRegistryAsksECRForATokenAsTheAssumedRole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, role, ecrKey string
		wantAssumes        int32
	}{
		{name: "with a role to assume", role: roleARN, ecrKey: assumedKey, wantAssumes: 1},
		{name: "with the process's own credentials", ecrKey: baseKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, ref := privateImage(t, "AWS", ecrPassword, nil)
			fake := newAWSFake(t, tc.ecrKey)
			f := newFixture(t, registryauth.Options{
				AWS:         &aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider(baseKey, "base-secret", "")},
				STSEndpoint: fake.url, ECREndpoint: fake.url,
			})
			f.add(t, registries.Add{Host: host, Kind: registries.CloudRegistry, Principal: tc.role})
			for range 2 {
				if _, err := f.cache.Pull(t.Context(), ref); err != nil {
					t.Fatalf("pull: %v", err)
				}
			}
			if a, n := fake.assumes.Load(), fake.tokens.Load(); a != tc.wantAssumes || n != 1 {
				t.Fatalf("%d assume-roles and %d ECR tokens for two pulls, want %d and 1", a, n, tc.wantAssumes)
			}
		})
	}
}

func TestCloudRegistryRefusedRoleSaysWhich(t *testing.T) {
	t.Parallel()
	host, ref := privateImage(t, "AWS", ecrPassword, nil)
	fake := newAWSFake(t, assumedKey)
	f := newFixture(t, registryauth.Options{
		AWS:         &aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider(baseKey, "base-secret", ""), RetryMaxAttempts: 1},
		STSEndpoint: fake.url, ECREndpoint: fake.url,
	})
	other := "arn:aws:iam::123456789012:role/not-allowed"
	f.add(t, registries.Add{Host: host, Kind: registries.CloudRegistry, Principal: other})
	_, err := f.cache.Pull(t.Context(), ref)
	if err == nil || !strings.Contains(err.Error(), "registry "+host+" (cloud_registry as "+other+")") || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("pull with a role STS refuses: %v", err)
	}
}

// Without a service account to impersonate, workload_identity signs in with the process's own
// Application Default Credentials: here a service account key whose token_uri is a loopback
// fake of Google's OAuth token endpoint.
func TestWorkloadIdentityWithoutAServiceAccountUsesTheProcesssOwnCredentials(t *testing.T) {
	var grants atomic.Int32
	oauth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		grants.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"ya29.own-token","expires_in":3600,"token_type":"Bearer"}`)
	}))
	t.Cleanup(oauth.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	adc, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1", "client_id": "1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "host@p.iam.gserviceaccount.com", "token_uri": oauth.URL + "/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(path, adc, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)

	host, ref := privateImage(t, "oauth2accesstoken", "ya29.own-token", nil)
	f := newFixture(t, registryauth.Options{})
	f.add(t, registries.Add{Host: host, Kind: registries.WorkloadIdentity})
	for range 2 {
		if _, err := f.cache.Pull(t.Context(), ref); err != nil {
			t.Fatalf("pull: %v", err)
		}
	}
	if n := grants.Load(); n != 1 {
		t.Fatalf("%d tokens granted for two pulls, want 1", n)
	}
}
