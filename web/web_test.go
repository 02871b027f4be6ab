package web

import (
	"io/fs"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/testkit"
)

func TestHandler(t *testing.T) {
	if _, err := fs.Stat(files, "dist/index.html"); err != nil {
		testkit.Missing(t, "the dashboard is not built: run `make web`")
	}
	asset := firstAsset(t)
	for _, tc := range []struct {
		name, method, path string
		code               int
		body, cache        string
	}{
		{"the root serves the app", "GET", "/", 200, `<div id="root">`, "no-cache"},
		{"a deep link serves the app", "GET", "/tasks/task_01abc", 200, `<div id="root">`, "no-cache"},
		{"an asset is cached for good", "GET", "/" + asset, 200, "", "public, max-age=31536000, immutable"},
		{"a missing asset is not the app", "GET", "/assets/nope.js", 404, "", ""},
		{"an escaping asset path is not served", "GET", "/assets/../README.md", 404, "", ""},
		{"an unknown RPC path is the API's 404", "GET", "/rpc/svc.app.v1.Nope/Get", 404, "", ""},
		{"an unknown api path is the API's 404", "GET", "/api/nope", 404, "", ""},
		{"a POST is never the app", "POST", "/tasks", 404, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Handler().ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d", rec.Code, tc.code)
			}
			if !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("body %.200q lacks %q", rec.Body.String(), tc.body)
			}
			if got := rec.Header().Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
		})
	}
}

func TestAppPageForbidsFramingAndForeignScripts(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	for header, want := range map[string]string{
		"Content-Security-Policy": "script-src 'self'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := rec.Header().Get(header); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want it to contain %q", header, got, want)
		}
	}
}

func firstAsset(t *testing.T) string {
	entries, err := fs.ReadDir(files, "dist/assets")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no built assets: %v", err)
	}
	return "assets/" + entries[0].Name()
}
