// Package web serves the dashboard: the TypeScript app under web/src, built by `make web` into
// dist/ and embedded into the binary. A binary built without it (plain `go build` on a fresh
// clone) serves a page that says how to build it; make dev, make test and make deploy build it
// first.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var files embed.FS

// APIPrefixes are the paths the API owns: the dashboard never answers under them, so a wrong
// API path gets the API's 404, not the app's page.
var APIPrefixes = []string{"/rpc/", "/api/", "/healthz"}

// Handler serves the built app: its hashed assets under /assets/ (cached for good, since a
// new build changes their names) and index.html for every other GET, so a deep link such as
// /tasks/task_01… opens the app at that page.
func Handler() http.Handler {
	dist, _ := fs.Sub(files, "dist")
	assets := http.FileServerFS(dist)
	index, err := fs.ReadFile(dist, "index.html")
	if err != nil {
		index = notBuilt
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead || ownedByAPI(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if strings.HasPrefix(r.URL.Path, "/assets/") {
			name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
			if _, err := fs.Stat(dist, name); err != nil || !strings.HasPrefix(name, "assets/") {
				http.NotFound(w, r)
				return
			}
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
			assets.ServeHTTP(w, r)
			return
		}
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", csp)
		_, _ = w.Write(index)
	})
}

// csp keeps the page to its own scripts and styles and its own origin's API: an injected
// string in a task title or an agent's output cannot load or post anywhere else.
const csp = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

func ownedByAPI(p string) bool {
	for _, prefix := range APIPrefixes {
		if strings.HasPrefix(p, prefix) || p+"/" == prefix {
			return true
		}
	}
	return false
}

var notBuilt = []byte(`<!doctype html><title>Hangar</title>
<p>The dashboard is not built into this binary: run <code>make web</code> (or <code>make dev</code>) and rebuild.</p>
`)
