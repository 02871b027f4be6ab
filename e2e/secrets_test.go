package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// postSecretJSON posts a hand-written JSON body and checks the status; no answer may hold leak, the value
// written (nor any read a secret's plaintext).
func postSecretJSON(t *testing.T, s *stack, key, path, body string, want int, leak string) map[string]any {
	t.Helper()
	status, out := postJSON(t, s, key, path, body)
	raw, _ := json.Marshal(out)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", path, body, status, want, raw)
	}
	if strings.Contains(string(raw), leak) {
		t.Fatalf("%s answered the secret: %s", path, raw)
	}
	return out
}

// jsonField reads a dotted path of a JSON answer.
func jsonField(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func TestOrgSecretsAreAdminOnlyVersionedAndNeverRead(t *testing.T) {
	s := newSessionsStack(t)
	user := s.mintKey(t, "alice@example.com", false)
	const leak = "sk-never-shown"
	const put = "svc.app.v1.OrgSecretService/PutOrgSecret"
	const list = "svc.app.v1.OrgSecretService/ListOrgSecrets"
	const del = "svc.app.v1.OrgSecretService/DeleteOrgSecret"

	for path, body := range map[string]string{put: `{"name":"org/k","value":"` + leak + `"}`, list: `{}`, del: `{"name":"org/k"}`} {
		postSecretJSON(t, s, user, path, body, http.StatusForbidden, leak)
	}

	created := postSecretJSON(t, s, s.admin, put, `{"name":"org/k","value":"`+leak+`-1","description":"router key","expected_version":0}`, http.StatusOK, leak)
	if jsonField(created, "created") != true || jsonField(created, "secret.version") != "1" || jsonField(created, "secret.name") != "org/k" ||
		jsonField(created, "secret.description") != "router key" || jsonField(created, "secret.created_by_user_id") == nil {
		t.Fatalf("created: %v", created)
	}
	replaced := postSecretJSON(t, s, s.admin, put, `{"name":"org/k","value":"`+leak+`-2","expected_version":1}`, http.StatusOK, leak)
	if jsonField(replaced, "created") != false || jsonField(replaced, "secret.version") != "2" || jsonField(replaced, "secret.description") != "router key" {
		t.Fatalf("replaced: %v", replaced)
	}
	postSecretJSON(t, s, s.admin, put, `{"name":"org/k","value":"`+leak+`-3","expected_version":1}`, http.StatusConflict, leak)
	postSecretJSON(t, s, s.admin, put, `{"name":"bad name","value":"x"}`, http.StatusBadRequest, leak)
	postSecretJSON(t, s, s.admin, put, `{"name":"other","value":"`+leak+`-other"}`, http.StatusOK, leak)

	listed := postSecretJSON(t, s, s.admin, list, `{}`, http.StatusOK, leak)
	secrets, _ := listed["secrets"].([]any)
	if len(secrets) != 2 || jsonField(secrets[0], "name") != "org/k" || jsonField(secrets[1], "name") != "other" {
		t.Fatalf("listed: %v", listed)
	}

	postSecretJSON(t, s, s.admin, del, `{"name":"org/k","expected_version":1}`, http.StatusConflict, leak)
	deleted := postSecretJSON(t, s, s.admin, del, `{"name":"org/k","expected_version":2}`, http.StatusOK, leak)
	if jsonField(deleted, "secret.name") != "org/k" || jsonField(deleted, "secret.version") != "2" {
		t.Fatalf("deleted: %v", deleted)
	}
	postSecretJSON(t, s, s.admin, del, `{"name":"org/k"}`, http.StatusNotFound, leak)
	listed = postSecretJSON(t, s, s.admin, list, `{}`, http.StatusOK, leak)
	if secrets, _ := listed["secrets"].([]any); len(secrets) != 1 {
		t.Fatalf("after delete: %v", listed)
	}
}

func TestOAuthCredentialsBelongToTheirSubject(t *testing.T) {
	s := newSessionsStack(t)
	alice := s.mintKey(t, "alice@example.com", false)
	bob := s.mintKey(t, "bob@example.com", false)
	const leak = "oat-never-shown"
	const svc = "svc.app.v1.OAuthCredentialService/"
	me := `{"kind":"OAUTH_SUBJECT_KIND_USER"}`

	put := postSecretJSON(t, s, alice, svc+"PutCredential", `{"subject":`+me+`,"provider":"anthropic","secret":"`+leak+`"}`, http.StatusOK, leak)
	aliceID, _ := jsonField(put, "credential.subject_id").(string)
	if !strings.HasPrefix(aliceID, "user_") || jsonField(put, "credential.version") != "1" || jsonField(put, "credential.connected") != true ||
		jsonField(put, "credential.status") != "connected" || jsonField(put, "credential.provider") != "anthropic" {
		t.Fatalf("put: %v", put)
	}
	aliceSubject := `{"kind":"OAUTH_SUBJECT_KIND_USER","id":"` + aliceID + `"}`

	// Bob cannot see or change Alice's credentials, nor tell that they exist.
	postSecretJSON(t, s, bob, svc+"ListCredentials", `{"subject":`+aliceSubject+`}`, http.StatusNotFound, leak)
	postSecretJSON(t, s, bob, svc+"Disconnect", `{"subject":`+aliceSubject+`,"provider":"anthropic"}`, http.StatusNotFound, leak)
	postSecretJSON(t, s, bob, svc+"PutCredential", `{"subject":`+aliceSubject+`,"provider":"anthropic","secret":"x"}`, http.StatusNotFound, leak)
	if got := postSecretJSON(t, s, bob, svc+"ListCredentials", `{"subject":`+me+`}`, http.StatusOK, leak); len(got["credentials"].([]any)) != 0 {
		t.Fatalf("bob sees %v", got)
	}
	// Connectors and MCP servers are the organisation's: admins only.
	postSecretJSON(t, s, alice, svc+"PutCredential", `{"subject":{"kind":"OAUTH_SUBJECT_KIND_CONNECTOR","id":"github"},"provider":"github","secret":"x"}`, http.StatusForbidden, leak)
	postSecretJSON(t, s, s.admin, svc+"PutCredential", `{"subject":{"kind":"OAUTH_SUBJECT_KIND_CONNECTOR","id":"github"},"provider":"github","secret":"`+leak+`"}`, http.StatusOK, leak)
	// Admins see anyone's.
	if got := postSecretJSON(t, s, s.admin, svc+"ListCredentials", `{"subject":`+aliceSubject+`}`, http.StatusOK, leak); len(got["credentials"].([]any)) != 1 {
		t.Fatalf("admin sees %v", got)
	}

	postSecretJSON(t, s, alice, svc+"Disconnect", `{"subject":`+me+`,"provider":"anthropic","expected_version":2}`, http.StatusConflict, leak)
	gone := postSecretJSON(t, s, alice, svc+"Disconnect", `{"subject":`+me+`,"provider":"anthropic","expected_version":1}`, http.StatusOK, leak)
	if jsonField(gone, "credential.connected") != false || jsonField(gone, "credential.version") != "2" || jsonField(gone, "credential.status") != "disconnected" {
		t.Fatalf("disconnected: %v", gone)
	}
	postSecretJSON(t, s, alice, svc+"Disconnect", `{"subject":`+me+`,"provider":"openai"}`, http.StatusNotFound, leak)
	listed := postSecretJSON(t, s, alice, svc+"ListCredentials", `{"subject":`+me+`}`, http.StatusOK, leak)
	if creds := listed["credentials"].([]any); len(creds) != 1 || jsonField(creds[0], "connected") != false {
		t.Fatalf("listed: %v", listed)
	}
	again := postSecretJSON(t, s, alice, svc+"PutCredential", `{"subject":`+me+`,"provider":"anthropic","secret":"`+leak+`-2"}`, http.StatusOK, leak)
	if jsonField(again, "credential.version") != "3" || jsonField(again, "credential.connected") != true {
		t.Fatalf("reconnected: %v", again)
	}
	// anthropic signs in by a redirect flow (PKCE, Claude Code's public client), not a device flow.
	postSecretJSON(t, s, alice, svc+"BeginFlow", `{"subject":`+me+`,"provider":"anthropic"}`, http.StatusBadRequest, leak)
	begun := postSecretJSON(t, s, alice, svc+"BeginRedirectFlow", `{"subject":`+me+`,"provider":"anthropic","redirect_uri":"http://127.0.0.1:1455/callback"}`, http.StatusOK, leak)
	if u, _ := jsonField(begun, "authorize_url").(string); !strings.HasPrefix(u, "https://claude.ai/oauth/authorize?") || !strings.Contains(u, "code_challenge_method=S256") {
		t.Fatalf("authorize_url %q", u)
	}
}
