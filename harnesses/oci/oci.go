// Package oci publishes and fetches harness plugins as OCI artifacts, in the layout wasm tools
// share (the wasm-to-oci / WASI OCI convention): an image manifest whose config has media type
// application/vnd.wasm.config.v0+json and whose one layer, of media type application/wasm, is
// the module. Fetch signs in with the keychain it is given (the deployment's registry store, as
// every image pull does), never the machine's docker config; every byte fetched is checked
// against its digest. Fetch dials through an egress policy and
// reports failures without repeating what the registry sent.
package oci

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/hangar-dev/hangar/platform/egress"
)

// Media types of a wasm artifact.
const (
	ConfigMediaType types.MediaType = "application/vnd.wasm.config.v0+json"
	LayerMediaType  types.MediaType = "application/wasm"
)

// MaxModuleBytes bounds a plugin module fetched from a registry.
const MaxModuleBytes = 64 << 20

// ErrNotAPlugin is an artifact that is not a wasm plugin: another config or layer media type,
// not exactly one layer, or too large.
var ErrNotAPlugin = errors.New("not a wasm plugin artifact")

// Module is a plugin fetched from a registry.
type Module struct {
	Wasm []byte
	// Digest is the manifest digest the reference resolved to; LayerDigest the module's.
	Digest      string
	LayerDigest string
}

// Fetch pulls the plugin at ref through registries, the policy of what it may reach beyond
// public addresses, signed in by keychain (nil: anonymous). Options add to these.
func Fetch(ctx context.Context, ref string, registries egress.Policy, keychain authn.Keychain, opts ...remote.Option) (*Module, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("plugin reference %q: %w", ref, err)
	}
	if keychain == nil {
		keychain = authn.NewMultiKeychain() // answers anonymous for every registry
	}
	opts = append(append(registries.Registry(), remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain)), opts...)
	m, err := fetch(r, opts)
	if err != nil {
		return nil, fmt.Errorf("fetch plugin %s: %w", ref, egress.RegistryError(err, ErrNotAPlugin))
	}
	return m, nil
}

func fetch(r name.Reference, opts []remote.Option) (*Module, error) {
	img, err := remote.Image(r, opts...)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if m.Config.MediaType != ConfigMediaType {
		// The media type found is the registry's text, which registry errors never repeat.
		return nil, fmt.Errorf("%w: its config media type is not %q", ErrNotAPlugin, ConfigMediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != LayerMediaType {
		return nil, fmt.Errorf("%w: want exactly one layer of media type %q", ErrNotAPlugin, LayerMediaType)
	}
	if m.Layers[0].Size > MaxModuleBytes {
		return nil, fmt.Errorf("%w: the module is %d bytes, more than %d", ErrNotAPlugin, m.Layers[0].Size, MaxModuleBytes)
	}
	layer, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		return nil, err
	}
	// Compressed is the blob as stored: the module itself, verified against its digest as it
	// is read.
	rc, err := layer.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	wasm, err := io.ReadAll(io.LimitReader(rc, MaxModuleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(wasm) > MaxModuleBytes {
		return nil, fmt.Errorf("%w: the module is larger than %d bytes", ErrNotAPlugin, MaxModuleBytes)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	return &Module{Wasm: wasm, Digest: digest.String(), LayerDigest: m.Layers[0].Digest.String()}, nil
}

// Publish pushes wasm to ref as a plugin artifact and returns the manifest digest.
func Publish(ctx context.Context, wasm []byte, ref string, opts ...remote.Option) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("plugin reference %q: %w", ref, err)
	}
	img, err := Artifact(wasm)
	if err != nil {
		return "", err
	}
	if err := remote.Write(r, img, append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)...); err != nil {
		return "", fmt.Errorf("publish plugin to %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// Artifact is wasm as an OCI artifact image.
func Artifact(wasm []byte) (v1.Image, error) {
	if len(wasm) < 4 || string(wasm[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: the file is not a WebAssembly module", ErrNotAPlugin)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(wasm, LayerMediaType)})
	if err != nil {
		return nil, fmt.Errorf("build plugin artifact: %w", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, ConfigMediaType), nil
}
