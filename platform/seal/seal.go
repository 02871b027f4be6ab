// Package seal encrypts the small secrets Hangar must keep (a session's environment, with the
// user's secrets in it) under the deployment's Tink AEAD keyset, bound to the record they belong
// to, so that a database read alone reveals nothing and a sealed value copied onto another
// record does not open.
package seal

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/insecurecleartextkeyset"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/tink"
)

// Sealer encrypts and decrypts with one keyset.
type Sealer struct {
	aead tink.AEAD
	// root is the keyset's first key's material, what Derive starts from.
	root []byte
}

// NewKeysetJSON makes a fresh AES-256-GCM keyset in Tink's JSON form, for `hangar dev` and
// tests. Production keysets come from the deployment's secret store.
func NewKeysetJSON() ([]byte, error) {
	h, err := keyset.NewHandle(aead.AES256GCMKeyTemplate())
	if err != nil {
		return nil, fmt.Errorf("new keyset: %w", err)
	}
	var buf bytes.Buffer
	if err := insecurecleartextkeyset.Write(h, keyset.NewJSONWriter(&buf)); err != nil {
		return nil, fmt.Errorf("write keyset: %w", err)
	}
	return buf.Bytes(), nil
}

// FromKeysetJSON loads a keyset in Tink's JSON form.
func FromKeysetJSON(js []byte) (*Sealer, error) {
	h, err := insecurecleartextkeyset.Read(keyset.NewJSONReader(bytes.NewReader(js)))
	if err != nil {
		return nil, fmt.Errorf("read keyset: %w", err)
	}
	a, err := aead.New(h)
	if err != nil {
		return nil, fmt.Errorf("keyset is not an AEAD keyset: %w", err)
	}
	ks := insecurecleartextkeyset.KeysetMaterial(h)
	if len(ks.GetKey()) == 0 || len(ks.GetKey()[0].GetKeyData().GetValue()) == 0 {
		return nil, fmt.Errorf("keyset has no key material")
	}
	return &Sealer{aead: a, root: ks.GetKey()[0].GetKeyData().GetValue()}, nil
}

// Derive returns a 32-byte secret for purpose (e.g. "session ids"), the same in every process
// of the deployment and unknown outside it, by HKDF-SHA256 from the keyset's first key. The
// first key stays when a rotation adds a new primary (it must, to open what it sealed), so a
// rotation keeps derived secrets; only removing that key changes them.
func (s *Sealer) Derive(purpose string) []byte {
	k, err := hkdf.Key(sha256.New, s.root, nil, "hangar "+purpose, 32)
	if err != nil {
		// Only a length over 255 hash sizes fails.
		panic(err)
	}
	return k
}

// Seal encrypts plaintext for the record named by owner (its path or id).
func (s *Sealer) Seal(plaintext []byte, owner string) ([]byte, error) {
	ct, err := s.aead.Encrypt(plaintext, []byte(owner))
	if err != nil {
		return nil, fmt.Errorf("seal for %s: %w", owner, err)
	}
	return ct, nil
}

// Open decrypts what Seal made for the same owner.
func (s *Sealer) Open(ciphertext []byte, owner string) ([]byte, error) {
	pt, err := s.aead.Decrypt(ciphertext, []byte(owner))
	if err != nil {
		return nil, fmt.Errorf("open sealed value of %s: %w", owner, err)
	}
	return pt, nil
}

// SealEnv seals an environment map for owner; an empty map seals to nil.
func (s *Sealer) SealEnv(env map[string]string, owner string) ([]byte, error) {
	if len(env) == 0 {
		return nil, nil
	}
	js, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode env: %w", err)
	}
	return s.Seal(js, owner)
}

// OpenEnv opens what SealEnv made; nil opens to an empty map.
func (s *Sealer) OpenEnv(sealed []byte, owner string) (map[string]string, error) {
	env := map[string]string{}
	if len(sealed) == 0 {
		return env, nil
	}
	js, err := s.Open(sealed, owner)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(js, &env); err != nil {
		return nil, fmt.Errorf("decode env of %s: %w", owner, err)
	}
	return env, nil
}
