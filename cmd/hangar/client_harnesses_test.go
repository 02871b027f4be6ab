package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// TestHarnessesPushThenRegister publishes a plugin with `harnesses push` and registers, lists,
// shows and deletes it through the real API.
func TestHarnessesPushThenRegister(t *testing.T) {
	bash := testenv.RequirePlugins(t)["bash"]
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	cfg := config.Default()
	cfg.Registries = imagestest.Allow // the test registry is on loopback
	serveCLI(t, composition.Deps{DB: db, Config: cfg, Bucket: memblob.OpenBucket(nil), Sealer: sealer}, "dev@example.com")

	file := filepath.Join(t.TempDir(), "shell.wasm")
	if err := os.WriteFile(file, bash.Wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := imagestest.Registry(t) + "/plugins/shell:v1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"push", file, ref}, "pushed "},
		{[]string{"register", "my-shell", ref}, "descriptor.name:         my-shell"},
		{[]string{"list"}, "my-shell"},
		{[]string{"get", "my-shell"}, "Bash"},
		{[]string{"delete", "my-shell"}, "deleted harness my-shell"},
		{[]string{"delete", "my-shell"}, "no harness my-shell"},
	} {
		r := runHangar(t, "", append([]string{"harnesses"}, tc.args...)...)
		if r.err != nil || !strings.Contains(r.out, tc.want) {
			t.Fatalf("hangar harnesses %s: exit %d, %v, out %q (stderr %q), want %q", strings.Join(tc.args, " "), r.code, r.err, r.out, r.errOut, tc.want)
		}
	}
	if r := runHangar(t, "", "harnesses", "delete", "bash"); r.code == 0 {
		t.Fatalf("deleting a built-in harness succeeded: %q", r.out)
	}
}
