package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/pubsub"
)

// RequirePubSub fails (under CI) or skips (elsewhere) a test when the Pub/Sub emulator is not
// running.
func RequirePubSub(t testing.TB) {
	t.Helper()
	if os.Getenv("PUBSUB_EMULATOR_HOST") != "" {
		return
	}
	testkit.Missing(t, "PUBSUB_EMULATOR_HOST is not set: run the tests with `make test`, which starts the Firestore and Pub/Sub emulators")
}

// PubSub returns a client on the emulator in a project of its own with Hangar's topics and
// subscriptions provisioned, closed when t ends.
func PubSub(t testing.TB) *pubsub.Client {
	t.Helper()
	RequirePubSub(t)
	c, err := pubsub.Open(context.Background(), Project(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Provision(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}
