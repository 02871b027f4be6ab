package images_test

import (
	"context"
	"testing"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

func TestPullsReachOnlyWhatAnOperatorOpensAndRepeatNothingTheyHear(t *testing.T) {
	imagestest.ReplayPullAttacks(t, func(ctx context.Context, ref string, registries egress.Policy) error {
		c, err := images.New(t.TempDir(), images.WithRegistries(registries))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Pull(ctx, ref)
		return err
	})
}
