package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/functions/sessions"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// fileURL is the file route of path in session.
func (s *stack) fileURL(session, path string) string {
	return s.url + strings.NewReplacer("{id}", url.PathEscape(session), "/{path...}", path).Replace(httpapi.FilesPath)
}

// fileRequest sends a file route request with key and headers and returns the response and its
// body.
func fileRequest(t *testing.T, method, rawURL, key string, body []byte, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, rawURL, r)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(httpapi.APIKeyHeader, key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestFileRoutesUploadAndDownload(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	body := []byte("0123456789abcdefghij")

	t.Run("upload with its sha256, then download whole", func(t *testing.T) {
		resp, out := fileRequest(t, http.MethodPut, s.fileURL(id, "/work/up/a.txt"), s.admin, body, map[string]string{sessions.SHA256Header: sum(body), sessions.ModeHeader: "0750"})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload: %d %s", resp.StatusCode, out)
		}
		if got := s.sh(t, id, "cat /work/up/a.txt; stat -c ' %a' /work/up/a.txt"); got != string(body)+" 750\n" {
			t.Errorf("in the sandbox: %q", got)
		}
		resp, out = fileRequest(t, http.MethodGet, s.fileURL(id, "/work/up/a.txt"), s.admin, nil, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(out, body) {
			t.Fatalf("download: %d %q", resp.StatusCode, out)
		}
		if resp.ContentLength != int64(len(body)) || resp.Header.Get(sessions.SHA256Header) != sum(body) {
			t.Errorf("Content-Length %d, sha256 %q; want %d and %s", resp.ContentLength, resp.Header.Get(sessions.SHA256Header), len(body), sum(body))
		}
	})
	t.Run("a Range download sends only the range", func(t *testing.T) {
		for _, tc := range []struct {
			rng, want, contentRange string
		}{
			{"bytes=5-9", "56789", "bytes 5-9/20"},
			{"bytes=15-", "fghij", "bytes 15-19/20"},
			{"bytes=-3", "hij", "bytes 17-19/20"},
		} {
			resp, out := fileRequest(t, http.MethodGet, s.fileURL(id, "/work/up/a.txt"), s.admin, nil, map[string]string{"Range": tc.rng})
			if resp.StatusCode != http.StatusPartialContent || string(out) != tc.want || resp.Header.Get("Content-Range") != tc.contentRange {
				t.Errorf("%s: %d %q %q, want 206 %q %q", tc.rng, resp.StatusCode, out, resp.Header.Get("Content-Range"), tc.want, tc.contentRange)
			}
		}
		resp, _ := fileRequest(t, http.MethodGet, s.fileURL(id, "/work/up/a.txt"), s.admin, nil, map[string]string{"Range": "bytes=50-60"})
		if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
			t.Errorf("a range past the end: %d, want 416", resp.StatusCode)
		}
	})
	t.Run("a wrong sha256 is refused and nothing is written", func(t *testing.T) {
		resp, out := fileRequest(t, http.MethodPut, s.fileURL(id, "/work/up/a.txt"), s.admin, []byte("replaced"), map[string]string{sessions.SHA256Header: sum([]byte("something else"))})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "sha256") {
			t.Errorf("upload: %d %s, want 400 naming sha256", resp.StatusCode, out)
		}
		resp, _ = fileRequest(t, http.MethodPut, s.fileURL(id, "/work/up/new.txt"), s.admin, []byte("new"), map[string]string{sessions.SHA256Header: sum([]byte("other"))})
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("upload of a new file: %d, want 400", resp.StatusCode)
		}
		if got := s.sh(t, id, "cat /work/up/a.txt; ls /work/up"); got != string(body)+"a.txt\n" {
			t.Errorf("after refused uploads the sandbox holds %q", got)
		}
	})
	t.Run("a missing file is not_found", func(t *testing.T) {
		resp, _ := fileRequest(t, http.MethodGet, s.fileURL(id, "/work/nope"), s.admin, nil, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("status %d, want 404", resp.StatusCode)
		}
	})
}

func TestSecurityFileRoutesStayInTheSandboxAndRefuseStrangers(t *testing.T) {
	s := newSandboxStack(t, 1, nil)
	id := s.create(t, nil)
	secret, err := os.CreateTemp("", "host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(secret.Name())
	_, _ = secret.WriteString("host only")
	secret.Close()
	s.sh(t, id, "mkdir -p /work && echo mine > /work/f && ln -s "+secret.Name()+" /work/abs-link && ln -s ../../../../../../.. /work/up")

	t.Run("paths that lead out read nothing of the host", func(t *testing.T) {
		for _, p := range []string{"/work/abs-link", "/work/up" + secret.Name(), "/work/%2e%2e/%2e%2e" + secret.Name(), "/../../.." + secret.Name()} {
			resp, out := fileRequest(t, http.MethodGet, s.fileURL(id, p), s.admin, nil, nil)
			if bytes.Contains(out, []byte("host only")) {
				t.Fatalf("GET %s leaked the host's file", p)
			}
			if resp.StatusCode == http.StatusOK {
				t.Errorf("GET %s: 200, want a refusal", p)
			}
		}
		for _, p := range []string{"/work/abs-link", "/work/up" + secret.Name()} {
			_, _ = fileRequest(t, http.MethodPut, s.fileURL(id, p), s.admin, []byte("overwritten"), nil)
			if b, _ := os.ReadFile(secret.Name()); string(b) != "host only" {
				t.Fatalf("PUT %s changed the host's file", p)
			}
		}
	})
	t.Run("strangers are refused", func(t *testing.T) {
		bob := s.mintKey(t, "bob@example.com", false)
		for _, tc := range []struct {
			name string
			key  string
			want int
		}{
			{"no key", "", http.StatusUnauthorized},
			{"another user's key", bob, http.StatusNotFound},
		} {
			for _, method := range []string{http.MethodGet, http.MethodPut} {
				var body []byte
				if method == http.MethodPut {
					body = []byte("theirs")
				}
				resp, out := fileRequest(t, method, s.fileURL(id, "/work/f"), tc.key, body, nil)
				if resp.StatusCode != tc.want || bytes.Contains(out, []byte("mine")) {
					t.Errorf("%s %s: %d %q, want %d", tc.name, method, resp.StatusCode, out, tc.want)
				}
			}
		}
		if got := s.sh(t, id, "cat /work/f"); got != "mine\n" {
			t.Errorf("the file is now %q", got)
		}
	})
}
