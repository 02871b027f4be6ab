package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDashboardInBrowser drives the dashboard in Debian's Chromium against a real `hangar dev`:
// web/e2e's browser tests sign in, find a task, watch its session's events arrive live, send a
// prompt, take a checkpoint and open a session's app at its own origin. Screenshots of each page
// land in web/e2e/screenshots.
func TestDashboardInBrowser(t *testing.T) {
	shots := filepath.Join("..", "..", "web", "e2e", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(shots)
	if err != nil {
		t.Fatal(err)
	}
	runBrowserTests(t, "e2e/dashboard.e2e.ts", "HANGAR_SCREENSHOTS="+abs)
}

// TestSecurityCrossSitePagesCannotRunShellCommands replays the cross-site shell attack in
// Chromium (web/e2e/crosssite.e2e.ts): signed in to the dashboard, the browser visits a page of
// another origin that navigates it to the shell route with a command, and that opens the shell
// WebSocket; neither runs the command, and the dashboard's own WebSocket still does.
func TestSecurityCrossSitePagesCannotRunShellCommands(t *testing.T) {
	runBrowserTests(t, "e2e/crosssite.e2e.ts")
}

// runBrowserTests runs one web/e2e file against a fresh `hangar dev`, with HANGAR_URL,
// HANGAR_API_KEY, HANGAR_IMAGE and env set.
func runBrowserTests(t *testing.T, file string, env ...string) {
	web, npm := browserTools(t, "npm")
	dev := serveDev(t)
	key := readDevFile(t, dev, "admin.key")
	registry := readDevFile(t, dev, "image", "registry-addr")
	cmd := exec.Command(npm, "--prefix", web, "run", "e2e", "--", file)
	cmd.Env = append(os.Environ(),
		"HANGAR_URL="+dev.url,
		"HANGAR_API_KEY="+key,
		"HANGAR_IMAGE="+registry+"/hangar/dev:latest",
		"NO_COLOR=1",
	)
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("browser tests %s failed: %v\n%s\n--- hangar dev's output:\n%s", file, err, out, dev.out)
	}
}
