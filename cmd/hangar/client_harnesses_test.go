package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/functions/api"
	"github.com/hangar-dev/hangar/functions/platform/auth"
	"github.com/hangar-dev/hangar/functions/platform/config"
	"github.com/hangar-dev/hangar/functions/platform/seal"
	"github.com/hangar-dev/hangar/harnesses/builtin"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// TestHarnessesPushThenRegister publishes a plugin with `harnesses push` and registers, lists,
// shows and deletes it through the real API.
func TestHarnessesPushThenRegister(t *testing.T) {
	bash, ok := builtin.Modules()["bash"]
	if !ok {
		if os.Getenv("CI") == "true" {
			t.Fatal("no built-in plugins embedded: run `make plugins` first (make test does)")
		}
		t.Skip("no built-in plugins embedded: run `make plugins` first")
	}
	db, _ := testenv.Firestore(t)
	ks, err := seal.NewKeysetJSON()
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.FromKeysetJSON(ks)
	if err != nil {
		t.Fatal(err)
	}
	a := api.New(api.Deps{DB: db, Config: config.Default(), Bucket: memblob.OpenBucket(nil), Sealer: sealer})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(a.Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	u, err := a.Users().EnsureHuman(context.Background(), "dev@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := a.Keys().Create(context.Background(), auth.NewKeyInput{Name: "dev", Kind: auth.KindPersonal, UserID: u.ID}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HANGAR_URL", "http://"+ln.Addr().String())
	t.Setenv("HANGAR_API_KEY", key)

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
