package imagesvc

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// A disabled image's chunks stay while a session not deleted names it (the chunk store's keep
// set, not the hosts'), and no collection runs until the image has been disabled for
// disableGrace: a session may still be starting from it on another instance.
func TestTheKeepSetHoldsSessionsImagesAndWaitsOutADisable(t *testing.T) {
	db, _ := testenv.Firestore(t)
	clk := clock.NewFake(time.Now())
	s := New(Deps{DB: db, Clock: clk})
	ctx := t.Context()
	const repo = "reg.example/team/app"
	enabled, disabled := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	for _, img := range []*Image{
		{ID: imageID(repo + ":a"), URI: repo + ":a", Repo: repo, Digest: enabled},
		{ID: imageID(repo + ":b"), URI: repo + ":b", Repo: repo, Digest: disabled, WarmLayer: "warm-b/1"},
	} {
		if _, err := db.Collection(imagesCollection).Doc(img.ID).Set(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	sessions := sessiondb.NewStore(db, clk.Now)
	for _, r := range []*sessiondb.Record{
		{ID: "evicted", Owner: "u", Status: sessiondb.Evicted, ImageURI: repo + "@" + disabled, ImageDigest: disabled, WarmLayer: "warm-b/1"},
		{ID: "deleted", Owner: "u", Status: sessiondb.Deleted, ImageURI: repo + "@sha256:" + strings.Repeat("c", 64)},
	} {
		if _, err := sessions.Create(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.rec.setImage(ctx, imageID(repo+":b"), func(i *Image) error { i.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}

	if _, deferred, err := s.keepSet(ctx); err != nil || !strings.Contains(deferred, repo+":b") {
		t.Fatalf("right after the disable: deferred %q, %v; want a wait naming the image", deferred, err)
	}
	clk.Advance(disableGrace)
	keep, deferred, err := s.keepSet(ctx)
	if err != nil || deferred != "" {
		t.Fatalf("after the grace: deferred %q, %v", deferred, err)
	}
	for _, tc := range []struct {
		name      string
		got, want []string
	}{
		{"keep_images (enabled, for hosts too)", keep.GetKeepImages(), []string{enabled}},
		{"keep_warm_layers", keep.GetKeepWarmLayers(), nil},
		{"session_images (the chunk store only)", keep.GetSessionImages(), []string{disabled}},
		{"session_warm_layers", keep.GetSessionWarmLayers(), []string{"warm-b/1"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
