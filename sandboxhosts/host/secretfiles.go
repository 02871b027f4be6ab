package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxfs"
)

// secretSub is abi.SecretDir inside the run dir: the sandbox sees the run dir at runMount.
const secretSub = "/secrets"

// placeSecretFile keeps a secret file's content in the sandbox's run dir — a host directory
// bind-mounted at /.hangar/run, outside the overlay's upper dir, removed with the sandbox — and
// makes f.Path a link to it. The harness reads the file where it looks; snapshots, artifacts
// and ReadFile (which see the overlay, not the mount) find only the link.
func placeSecretFile(b *box, f abi.File) error {
	// One name per path, so every turn's plan replaces the same file.
	sum := sha256.Sum256([]byte(f.Path))
	name := hex.EncodeToString(sum[:8]) + "-" + path.Base(f.Path)
	// The run dir is writable from inside the sandbox: it is opened as a root of its own, so a
	// link planted there resolves inside it and never reaches the host's files.
	run, err := sandboxfs.Open(b.runDir)
	if err != nil {
		return err
	}
	defer run.Close()
	if err := run.MkdirAll(secretSub, 0o700); err != nil {
		return err
	}
	if err := writeFile(run, secretSub+"/"+name, fileMode(f, 0o600), f.Content); err != nil {
		return err
	}
	if err := errors.Join(b.user.chown(run, secretSub), b.user.chown(run, secretSub+"/"+name)); err != nil {
		return err
	}
	if err := b.root.MkdirAll(path.Dir(f.Path), 0o755); err != nil {
		return err
	}
	if err := b.user.chownDirs(b.root, path.Dir(f.Path)); err != nil {
		return err
	}
	if err := b.root.Symlink(abi.SecretDir+"/"+name, f.Path); err != nil {
		return fmt.Errorf("link to the secret file: %w", err)
	}
	return nil
}
