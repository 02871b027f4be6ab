package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// repoRoot is the module's root, seen from this package's directory (where go test runs it).
const repoRoot = "../.."

// shellBlock is one shell code block of a page of the docs: its text, the line its fence is on,
// and why it is not run when the line above the fence says so (`<!-- not run: why -->`).
type shellBlock struct {
	line         int
	text, notRun string
}

var (
	fence       = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")
	notRunMarks = regexp.MustCompile(`^<!-- not run: (.+) -->$`)
)

// shellBlocks reads page (a path from the repository's root) and returns its shell blocks in
// order.
func shellBlocks(t *testing.T, page string) []shellBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []shellBlock
	for i := 0; i < len(lines); i++ {
		if !fence.MatchString(lines[i]) {
			continue
		}
		blk := shellBlock{line: i + 1}
		if i > 0 {
			if m := notRunMarks.FindStringSubmatch(lines[i-1]); m != nil {
				blk.notRun = m[1]
			}
		}
		var text strings.Builder
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			text.WriteString(lines[i] + "\n")
		}
		blk.text = text.String()
		out = append(out, blk)
	}
	return out
}

// blocksRunBy names, for each page whose shell blocks are meant to be run, the test that runs
// every one of them not marked `not run`.
var blocksRunBy = map[string]string{
	"README.md":         "TestReadmeQuickStart",
	"docs/harnesses.md": "TestHarnessesPageBuildsPushesAndRegistersItsPlugin",
}

// TestEveryShellBlockOfTheDocsIsRunOrSaysWhyNot keeps the docs' commands honest: a shell block
// is either run by the test its page names in blocksRunBy, or says on the line above it why it
// is not (a command against a real cloud project, say). A new page with commands to try fails
// here until a test runs them.
func TestEveryShellBlockOfTheDocsIsRunOrSaysWhyNot(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot, "README.md"))
	for _, p := range pages {
		page, _ := filepath.Rel(repoRoot, p)
		for _, b := range shellBlocks(t, page) {
			if _, run := blocksRunBy[page]; !run && b.notRun == "" {
				t.Errorf("%s:%d: a shell block no test runs: run it from a test named in blocksRunBy, or mark it <!-- not run: why -->", page, b.line)
			}
		}
	}
	for page := range blocksRunBy {
		if len(shellBlocks(t, page)) == 0 {
			t.Errorf("blocksRunBy names %s, which has no shell block any more", page)
		}
	}
}

// TestHarnessesPageBuildsPushesAndRegistersItsPlugin runs docs/harnesses.md's commands as
// written: build the example plugin for wasip1, push it with the client and register it. Only
// the registry differs (a loopback one stands for registry.example.com) and bin/hangar is a
// client built for the test; the plugin is built in a scratch directory.
func TestHarnessesPageBuildsPushesAndRegistersItsPlugin(t *testing.T) {
	testenv.RequirePlugins(t)
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	cfg := config.Default()
	cfg.Registries = imagestest.Allow // the test registry is on loopback
	serveCLI(t, composition.Deps{DB: db, Config: cfg, Bucket: memblob.OpenBucket(nil), Sealer: sealer}, "dev@example.com")
	bin := buildHangar(t)

	var script strings.Builder
	for _, b := range shellBlocks(t, "docs/harnesses.md") {
		if b.notRun == "" {
			script.WriteString(b.text)
		}
	}
	const docsRegistry = "registry.example.com"
	if !strings.Contains(script.String(), docsRegistry) || !strings.Contains(script.String(), "bin/hangar ") {
		t.Fatalf("the page's commands no longer use %s and bin/hangar; update this test:\n%s", docsRegistry, script.String())
	}
	scratch := t.TempDir()
	run := strings.NewReplacer(docsRegistry, imagestest.Registry(t), "bin/hangar ", bin+" ", "-o echo.wasm", "-o "+filepath.Join(scratch, "echo.wasm"), " echo.wasm ", " "+filepath.Join(scratch, "echo.wasm")+" ").Replace(script.String())
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", run)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/harnesses.md's commands failed: %v\n%s", err, out)
	}
	if r := runHangar(t, "", "harnesses", "get", "echo"); r.err != nil || !strings.Contains(r.out, "Echo") {
		t.Fatalf("after the page's commands, harnesses get echo: %v, %q (stderr %q)", r.err, r.out, r.errOut)
	}
}
