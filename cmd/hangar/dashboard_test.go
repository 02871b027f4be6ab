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
	web, npm := browserTools(t, "npm")
	dev := serveDev(t)
	key := readDevFile(t, dev, "admin.key")
	registry := readDevFile(t, dev, "image", "registry-addr")
	shots := filepath.Join(web, "e2e", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(npm, "--prefix", web, "run", "e2e")
	cmd.Env = append(os.Environ(),
		"HANGAR_URL="+dev.url,
		"HANGAR_API_KEY="+key,
		"HANGAR_IMAGE="+registry+"/hangar/dev:latest",
		"HANGAR_SCREENSHOTS="+shots,
		"NO_COLOR=1",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("browser tests failed: %v\n%s\n--- hangar dev's output:\n%s", err, out, dev.out)
	}
}
