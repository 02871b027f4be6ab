package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var envName = regexp.MustCompile(`\b(?:HANGAR|GOOGLE_CLOUD|OTEL)_[A-Z0-9_]*[A-Z0-9]\b`)

// documentedVariables are the variables docs/configuration.md's table names, each with its row's
// default column; "`A_B_X` / `_Y`" names A_B_X and A_B_Y.
func documentedVariables(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	vars := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		prev := ""
		for _, tok := range regexp.MustCompile("`([A-Z0-9_]+)`").FindAllStringSubmatch(cells[1], -1) {
			name := tok[1]
			if strings.HasPrefix(name, "_") && prev != "" {
				name = prev[:strings.LastIndex(prev, "_")] + name
			}
			vars[name], prev = cells[2], name
		}
	}
	return vars
}

// docs/configuration.md's table names every variable the tags of this package's structs
// read, with the tag's default; and every variable it names is read by a tag or somewhere in the
// code.
func TestTheConfigurationPageMatchesTheCode(t *testing.T) {
	documented := documentedVariables(t)
	code := map[string]bool{}
	for _, v := range variables() {
		if strings.HasPrefix(v.Key, fixedPrefix) {
			continue
		}
		code[v.Key] = true
		def, ok := documented[v.Key]
		if !ok {
			t.Errorf("platform/config reads %s, which docs/configuration.md's table does not list", v.Key)
			continue
		}
		if v.Default != "" && !strings.Contains(def, "`"+v.Default+"`") {
			t.Errorf("docs/configuration.md's table gives %s the default %q, the code `%s`", v.Key, strings.TrimSpace(def), v.Default)
		}
	}
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
			t.Errorf("docs/configuration.md's table lists %s, which no code reads", name)
		}
	}
}
