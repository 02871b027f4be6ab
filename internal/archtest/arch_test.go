// Package archtest enforces the house's dependency rule on the module's import graph: every
// package belongs to one layer of an ordered table, imports run only down or across within a
// layer, the engines and the services stay independent of their siblings but for the few edges
// listed by name, and production code never imports test helpers or tooling. The table is the
// picture in README.md, which picture_test.go draws from it.
package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/hangar-dev/hangar"

// layer is one row of the table. Lower rank is lower in the house.
type layer struct {
	rank int
	name string
}

var (
	contract    = layer{0, "contract (gen)"}
	platform    = layer{1, "platform"}
	foundations = layer{2, "runtimes and shared records"}
	engines     = layer{3, "engines"}
	services    = layer{4, "services"}
	composition = layer{5, "composition"}
	entryPoints = layer{6, "entry points"}
	tooling     = layer{7, "tooling"}
)

// layers maps folder prefixes to layers; the longest prefix wins. Every package must match one.
var layers = []struct {
	prefix string
	layer  layer
}{
	{"gen", contract},
	{"platform", platform},
	{"runtimes", foundations},
	{"records", foundations},
	{"automation", engines},
	{"harnesses", engines},
	{"sandboxhosts", engines},
	{"functions", services},
	{"composition", composition},
	{"web", services}, // the dashboard's built assets, served next to the services
	{"cmd", entryPoints},
	{"", entryPoints}, // functions.go, the Cloud Run entry point, is the module's root package
	{"emulators", tooling},
	{"bench", tooling},
	{"internal", tooling},
	{"e2e", tooling},
}

// allowed lists, by name, the only edges the layer rules would otherwise refuse.
var allowed = map[[2]string]string{
	{"sandboxhosts/host", "harnesses/abi"}:            "a host runs agent turns through harness plugins",
	{"sandboxhosts/host", "harnesses/harnesscatalog"}: "a host runs agent turns through harness plugins",
	{"sandboxhosts/host", "harnesses/harness"}:        "a host hands harness output to plugins in whole lines",
	{"cmd/hangar", "emulators"}:                       "`hangar dev` and `hangar emulators` start the emulators",
}

func layerOf(pkg string) (layer, bool) {
	best, found := -1, false
	var l layer
	for _, e := range layers {
		if (e.prefix == "" && pkg == "") || (e.prefix != "" && under(pkg, e.prefix)) {
			if len(e.prefix) > best {
				best, l, found = len(e.prefix), e.layer, true
			}
		}
	}
	return l, found
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// top is a package's top-level folder, or its service for functions/<service>.
func top(pkg string) string {
	parts := strings.Split(pkg, "/")
	if parts[0] == "functions" && len(parts) > 1 {
		return "functions/" + parts[1]
	}
	return parts[0]
}

// testHelper reports whether pkg exists to help tests: internal/testenv and every *test package.
func testHelper(pkg string) bool {
	last := pkg[strings.LastIndex(pkg, "/")+1:]
	return strings.HasSuffix(last, "test")
}

// rule returns why pkg may not import imp, or "".
func rule(pkg, imp string) string {
	if _, ok := allowed[[2]string{pkg, imp}]; ok {
		return ""
	}
	from, ok := layerOf(pkg)
	if !ok {
		return "the package is in no layer: add its folder to the table"
	}
	to, ok := layerOf(imp)
	if !ok {
		return "the import is in no layer: add its folder to the table"
	}
	helperFrom, helperTo := testHelper(pkg) || from == tooling, testHelper(imp) || to == tooling
	switch {
	case under(imp, "cmd"):
		return "nothing imports cmd/"
	case helperTo && !helperFrom:
		return "production code never imports test helpers or tooling"
	case helperFrom:
		return "" // tooling and test helpers may reach any layer below cmd
	case to.rank > from.rank:
		return fmt.Sprintf("%s may not import up into %s", from.name, to.name)
	case from == to && from == engines && top(pkg) != top(imp):
		return "an engine never imports another engine but for the edges listed by name"
	case from == to && from == services && top(pkg) != top(imp):
		return "a service never imports another service's package; shared needs go down a layer"
	}
	return ""
}

// imports maps every package of the module to the module packages its non-test files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := make(map[string][]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		var own []string
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module+"/") {
				own = append(own, strings.TrimPrefix(imp, module+"/"))
			}
		}
		graph[strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")] = own
	}
	if len(graph) < 10 {
		t.Fatalf("go list saw only %d packages", len(graph))
	}
	return graph
}

func TestEveryImportFollowsTheLayerTable(t *testing.T) {
	graph := imports(t)
	for pkg, imps := range graph {
		if _, ok := layerOf(pkg); !ok {
			t.Errorf("%s is in no layer of the table", pkg)
		}
		for _, imp := range imps {
			if why := rule(pkg, imp); why != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, why)
			}
		}
	}
	for edge := range allowed {
		if !contains(graph[edge[0]], edge[1]) {
			t.Errorf("allowed edge %s → %s is no longer used: drop it from the table", edge[0], edge[1])
		}
	}
}

func TestNoPackageNameIsUsedTwice(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.Name}} {{.ImportPath}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]string{}
	for line := range strings.Lines(string(out)) {
		name, path, _ := strings.Cut(strings.TrimSpace(line), " ")
		if name == "main" || strings.HasPrefix(path, module+"/gen/") {
			continue
		}
		if other, dup := seen[name]; dup {
			t.Errorf("package name %q is used by %s and %s", name, other, path)
		}
		seen[name] = path
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestRuleCatchesEachBoundary(t *testing.T) {
	cases := []struct {
		name, pkg, imp string
		allowed        bool
	}{
		{"service uses platform", "functions/tasks", "platform/auth", true},
		{"service uses engine", "functions/sessions", "sandboxhosts/hostclient", true},
		{"service uses shared records", "functions/sessions", "records/sessiondb", true},
		{"service imports another service", "functions/tasks", "functions/profiles", false},
		{"service internals import another service", "functions/tasks/internal/x", "functions/profiles/y", false},
		{"service imports its own internals", "functions/tasks", "functions/tasks/internal/x", true},
		{"composition uses services", "composition", "functions/tasks", true},
		{"platform imports a service", "platform/auth", "functions/tasks", false},
		{"platform imports records", "platform/store", "records/sessiondb", false},
		{"platform imports an engine", "platform/store", "automation/runs", false},
		{"records import an engine", "records/sessiondb", "sandboxhosts/host", false},
		{"runtime imports an engine", "runtimes/wasm", "harnesses/abi", false},
		{"engine uses runtime", "harnesses/harness", "runtimes/wasm", true},
		{"engine imports a service", "automation/dispatch", "functions/tasks", false},
		{"engine imports another engine", "automation/runner", "sandboxhosts/host", false},
		{"listed cross-engine edge", "sandboxhosts/host", "harnesses/abi", true},
		{"engine imports composition", "sandboxhosts/host", "composition", false},
		{"service imports composition", "functions/tasks", "composition", false},
		{"anything imports cmd", "functions/tasks", "cmd/hangar", false},
		{"entry point uses composition", "cmd/hangar", "composition", true},
		{"Cloud Run entry point uses composition", "", "composition", true},
		{"production imports a test helper", "sandboxhosts/host", "sandboxhosts/images/imagestest", false},
		{"production imports test env", "composition", "internal/testenv", false},
		{"production imports emulators", "composition", "emulators", false},
		{"listed tooling edge", "cmd/hangar", "emulators", true},
		{"test helper uses its subject", "sandboxhosts/images/imagestest", "sandboxhosts/images", true},
		{"tooling uses production", "internal/testenv", "sandboxhosts/host", true},
		{"unknown folder", "newthing/x", "platform/store", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why := rule(tc.pkg, tc.imp)
			if got := why == ""; got != tc.allowed {
				t.Errorf("%s → %s: allowed=%v (%q), want %v", tc.pkg, tc.imp, got, why, tc.allowed)
			}
		})
	}
}
