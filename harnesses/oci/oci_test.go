package oci_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hangar-dev/hangar/harnesses/oci"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// module is the smallest valid WebAssembly module: the magic and version 1.
var module = []byte("\x00asm\x01\x00\x00\x00")

func TestPublishedPluginsFetchByTagAndDigest(t *testing.T) {
	ctx := context.Background()
	reg := imagestest.Registry(t)
	digest, err := oci.Publish(ctx, module, reg+"/plugins/echo:v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{reg + "/plugins/echo:v1", reg + "/plugins/echo@" + digest} {
		m, err := oci.Fetch(ctx, ref, imagestest.Allow, nil)
		if err != nil {
			t.Fatalf("fetch %s: %v", ref, err)
		}
		if !bytes.Equal(m.Wasm, module) || m.Digest != digest || m.LayerDigest == "" {
			t.Fatalf("fetched %+v", m)
		}
	}
}

func TestWhatIsNotAPluginIsRefused(t *testing.T) {
	ctx := context.Background()
	reg := imagestest.Registry(t)
	if _, err := oci.Publish(ctx, []byte("#!/bin/sh\n"), reg+"/plugins/script:v1"); !errors.Is(err, oci.ErrNotAPlugin) {
		t.Fatalf("publishing a shell script: %v, want ErrNotAPlugin", err)
	}
	img, err := images.Busybox(nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := imagestest.Push(t, reg, "plugins/container", img)
	if _, err := oci.Fetch(ctx, ref, imagestest.Allow, nil); !errors.Is(err, oci.ErrNotAPlugin) {
		t.Fatalf("fetching a container image: %v, want ErrNotAPlugin", err)
	}
	if _, err := oci.Fetch(ctx, reg+"/plugins/missing:v1", imagestest.Allow, nil); err == nil {
		t.Fatal("fetching a missing plugin succeeded")
	}
	if _, err := oci.Fetch(ctx, "Not A Reference", imagestest.Allow, nil); err == nil {
		t.Fatal("a malformed reference was accepted")
	}
}

func TestFetchesReachOnlyWhatAnOperatorOpensAndRepeatNothingTheyHear(t *testing.T) {
	imagestest.ReplayPullAttacks(t, func(ctx context.Context, ref string, registries egress.Policy) error {
		_, err := oci.Fetch(ctx, ref, registries, nil)
		return err
	})
}

// TestSecurityAPluginReferenceToAnotherLoopbackPortIsRefused replays RegisterHarness under
// `hangar dev`, which opens its registry's host:port only: a plugin reference naming another
// loopback port (an emulator's REST API) is refused by name and never reaches it.
func TestSecurityAPluginReferenceToAnotherLoopbackPortIsRefused(t *testing.T) {
	var hits atomic.Int32
	emulator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(emulator.Close)
	reg := imagestest.Registry(t)
	ref := strings.TrimPrefix(emulator.URL, "http://") + "/plugins/echo:v1"
	_, err := oci.Fetch(context.Background(), ref, egress.MustParse(reg), nil)
	if !errors.Is(err, egress.ErrRefused) || !strings.Contains(err.Error(), "127.0.0.1 is a loopback address") {
		t.Fatalf("fetch %s = %v, want refused by name", ref, err)
	}
	if hits.Load() != 0 {
		t.Fatal("the fetch reached the other port")
	}
}
