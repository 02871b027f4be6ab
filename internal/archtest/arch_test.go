// Package archtest enforces DESIGN.md's dependency rule on the module's import graph: data flows
// cmd → functions → platform / engines → stores, and no service reaches into another.
package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/hangar-dev/hangar"

// imports maps every package of the module to the module packages it imports.
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

// service returns the service a package belongs to ("tasks" for functions/tasks/...), or "".
func service(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, "functions/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	if name == "platform" || name == "api" {
		return ""
	}
	return name
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// rule returns why pkg may not import imp, or "".
func rule(pkg, imp string) string {
	switch {
	case under(imp, "cmd"):
		return "nothing imports cmd/"
	case service(imp) != "" && service(pkg) != "" && service(imp) != service(pkg):
		return "a service never imports another service's package; shared needs go to functions/platform"
	case service(imp) != "" && (under(pkg, "automation") || under(pkg, "harnesses") || under(pkg, "sandboxhosts") || under(pkg, "emulators") || under(pkg, "functions/platform")):
		return "engines, hosts, emulators and the platform never import a service"
	case under(imp, "functions/api") && !(under(pkg, "cmd") || pkg == "" || under(pkg, "e2e")):
		return "only cmd/, the Cloud Run entry point and e2e assemble the API"
	}
	return ""
}

func TestDependencyRule(t *testing.T) {
	for pkg, imps := range imports(t) {
		for _, imp := range imps {
			if why := rule(pkg, imp); why != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, why)
			}
		}
	}
}

func TestRuleCatchesViolations(t *testing.T) {
	cases := []struct {
		pkg, imp string
		allowed  bool
	}{
		{"functions/tasks", "functions/platform/auth", true},
		{"functions/tasks", "functions/profiles", false},
		{"functions/tasks/internal/x", "functions/profiles/y", false},
		{"functions/tasks", "functions/tasks/internal/x", true},
		{"functions/api", "functions/tasks", true},
		{"functions/platform/auth", "functions/tasks", false},
		{"automation", "functions/tasks", false},
		{"sandboxhosts/runtime", "functions/sessions", false},
		{"emulators", "functions/platform/store", true},
		{"functions/tasks", "cmd/hangar", false},
		{"functions/tasks", "functions/api", false},
		{"cmd/hangar", "functions/api", true},
		{"", "functions/api", true},
	}
	for _, tc := range cases {
		if got := rule(tc.pkg, tc.imp) == ""; got != tc.allowed {
			t.Errorf("%s → %s: allowed=%v, want %v", tc.pkg, tc.imp, got, tc.allowed)
		}
	}
}
