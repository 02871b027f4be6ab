// Package testenv gives tests the real parts they run against: a Firestore client on the
// emulator, isolated by a project id unique to each test, so tests never wipe or see each
// other's data.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/store"
)

// Project returns a fresh project id for t: a readable part of the test name plus randomness.
func Project(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(nonID.ReplaceAllString(t.Name(), "-"))
	if len(name) > 20 {
		name = name[:20]
	}
	return "t-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b)
}

var nonID = regexp.MustCompile(`[^A-Za-z0-9]+`)

// RequireEmulators fails (under CI) or skips (elsewhere) a test when the emulators are not
// running; `make test` starts them and sets FIRESTORE_EMULATOR_HOST and PUBSUB_EMULATOR_HOST.
func RequireEmulators(t testing.TB) {
	t.Helper()
	if os.Getenv("FIRESTORE_EMULATOR_HOST") != "" {
		return
	}
	testkit.Missing(t, "FIRESTORE_EMULATOR_HOST is not set: run the tests with `make test`, which starts the Firestore and Pub/Sub emulators")
}

// Firestore returns a client on the emulator in a project of its own, closed when t ends.
func Firestore(t testing.TB) (*firestore.Client, string) {
	t.Helper()
	RequireEmulators(t)
	project := Project(t)
	db, err := store.Open(context.Background(), project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, project
}
