package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var envName = regexp.MustCompile(`\b(?:HANGAR|GOOGLE_CLOUD)_[A-Z0-9_]*[A-Z0-9]\b`)

// readmeVariables are the variables the README's Configuration table names; "`A_B_X` / `_Y`"
// names A_B_X and A_B_Y.
func readmeVariables(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "\n## Configuration\n")
	if start < 0 {
		t.Fatal("README.md has no Configuration section")
	}
	section := readme[start+1:]
	section = section[:strings.Index(section[1:], "\n## ")+1]
	vars := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		prev := ""
		for _, tok := range regexp.MustCompile("`([A-Z0-9_]+)`").FindAllStringSubmatch(first, -1) {
			name := tok[1]
			if strings.HasPrefix(name, "_") && prev != "" {
				name = prev[:strings.LastIndex(prev, "_")] + name
			}
			vars[name], prev = true, name
		}
	}
	return vars
}

// The README's configuration table names every variable this package reads, and every variable
// it names is read somewhere in the code.
func TestReadmeConfigurationTableMatchesTheCode(t *testing.T) {
	documented := readmeVariables(t)
	read := map[string]bool{}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range envName.FindAllString(string(b), -1) {
			read[name] = true
		}
	}
	for name := range read {
		if !documented[name] {
			t.Errorf("platform/config reads %s, which README.md's Configuration table does not list", name)
		}
	}
	code := map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "../.." || d.Name() == "gen") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range envName.FindAllString(string(b), -1) {
			code[name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range documented {
		if !code[name] && !strings.HasSuffix(name, "_EMULATOR_HOST") {
			t.Errorf("README.md's Configuration table lists %s, which no code reads", name)
		}
	}
}
