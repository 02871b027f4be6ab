package seal_test

import (
	"bytes"
	"maps"
	"testing"

	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/insecurecleartextkeyset"
	"github.com/tink-crypto/tink-go/v2/keyset"

	"github.com/hangar-dev/hangar/platform/seal"
)

func newSealer(t *testing.T) *seal.Sealer {
	t.Helper()
	js, err := seal.NewKeysetJSON()
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.FromKeysetJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealedEnvOpensOnlyForItsOwnerAndKey(t *testing.T) {
	s := newSealer(t)
	env := map[string]string{"GITHUB_TOKEN": "ghp_secret", "EMPTY": ""}
	sealed, err := s.SealEnv(env, "sessions/a")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("ghp_secret")) {
		t.Fatal("the sealed value holds the secret in clear")
	}
	got, err := s.OpenEnv(sealed, "sessions/a")
	if err != nil || !maps.Equal(got, env) {
		t.Fatalf("open: %v, %v", got, err)
	}
	if _, err := s.OpenEnv(sealed, "sessions/b"); err == nil {
		t.Fatal("a value sealed for one record opened for another")
	}
	if _, err := newSealer(t).OpenEnv(sealed, "sessions/a"); err == nil {
		t.Fatal("a value opened under another keyset")
	}
}

func TestEmptyEnvSealsToNothing(t *testing.T) {
	s := newSealer(t)
	sealed, err := s.SealEnv(nil, "x")
	if err != nil || sealed != nil {
		t.Fatalf("seal empty: %v, %v", sealed, err)
	}
	got, err := s.OpenEnv(nil, "x")
	if err != nil || len(got) != 0 {
		t.Fatalf("open nothing: %v, %v", got, err)
	}
}

func TestBadKeysetIsRefused(t *testing.T) {
	if _, err := seal.FromKeysetJSON([]byte(`{"key":[]}`)); err == nil {
		t.Fatal("an empty keyset loaded")
	}
}

func TestDeriveIsStablePerKeysetAndPurposeAndSurvivesRotation(t *testing.T) {
	js, err := seal.NewKeysetJSON()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := seal.FromKeysetJSON(js)
	again, _ := seal.FromKeysetJSON(js)
	other := newSealer(t)
	if !bytes.Equal(a.Derive("session ids"), again.Derive("session ids")) {
		t.Fatal("the same keyset derived two secrets for one purpose")
	}
	if bytes.Equal(a.Derive("session ids"), a.Derive("other")) || bytes.Equal(a.Derive("session ids"), other.Derive("session ids")) {
		t.Fatal("a derived secret is shared across purposes or keysets")
	}
	// A rotation adds a primary key after the first one.
	h, err := insecurecleartextkeyset.Read(keyset.NewJSONReader(bytes.NewReader(js)))
	if err != nil {
		t.Fatal(err)
	}
	m := keyset.NewManagerFromHandle(h)
	id, err := m.Add(aead.AES256GCMKeyTemplate())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetPrimary(id); err != nil {
		t.Fatal(err)
	}
	rotated, err := m.Handle()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := insecurecleartextkeyset.Write(rotated, keyset.NewJSONWriter(&buf)); err != nil {
		t.Fatal(err)
	}
	r, err := seal.FromKeysetJSON(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Derive("session ids"), r.Derive("session ids")) {
		t.Fatal("a key rotation changed the derived secret")
	}
}
