package host

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/container"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

// KindNetConnection is the event of one connection a sandbox made through the egress proxy.
const KindNetConnection = "net.connection"

// Where the network's files go inside every sandbox: the resolver and the trust bundle (the
// image's own roots and the interception CA), both bind-mounted read-only.
const (
	resolvConfPath = "/etc/resolv.conf"
	trustBundle    = "/etc/ssl/certs/ca-certificates.crt"
)

// imageBundles are where images keep their system trust bundle, most common first.
var imageBundles = []string{"etc/ssl/certs/ca-certificates.crt", "etc/pki/tls/certs/ca-bundle.crt", "etc/ssl/cert.pem"}

// caOwner is what the sealed interception CA is bound to.
const caOwner = "egress/ca"

// loadCA opens the host's interception CA from path, sealed, or makes and seals a new one.
func loadCA(path string, sealer *seal.Sealer) (*egressproxy.CA, error) {
	sealed, err := os.ReadFile(path)
	if err == nil {
		pemBytes, err := sealer.Open(sealed, caOwner)
		if err != nil {
			return nil, fmt.Errorf("open the interception CA: %w", err)
		}
		return egressproxy.ParseCA(pemBytes)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("interception CA: %w", err)
	}
	ca, err := egressproxy.NewCA()
	if err != nil {
		return nil, err
	}
	pemBytes, err := ca.MarshalPEM()
	if err != nil {
		return nil, err
	}
	if sealed, err = sealer.Seal(pemBytes, caOwner); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, sealed, 0o600); err != nil {
		return nil, fmt.Errorf("interception CA: %w", err)
	}
	return ca, nil
}

// newProxy is the host's egress proxy; its audit events go to the sessions' logs.
func (h *Host) newProxy(dataDir string) error {
	ca, err := loadCA(filepath.Join(dataDir, "egress-ca.sealed"), h.opts.Sealer)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	h.ca = ca
	e := h.opts.Config.Egress
	h.proxy, err = egressproxy.New(egressproxy.Options{
		CA: ca, Resolve: h.opts.EgressResolve, RootCAs: h.opts.EgressRootCAs, Log: h.log,
		Allow: h.opts.Config.SandboxEgress, AllowCA: h.opts.Config.SandboxEgressCA,
		Limits: egressproxy.Limits{IdleTimeout: e.IdleTimeout, MaxLifetime: e.Lifetime, HostConnections: e.MaxConnections,
			PerSandbox: e.MaxPerSandbox, MinShare: e.MinShare},
		Audit: func(session string, c egressproxy.Connection) {
			if key, ok := strings.CutPrefix(session, warmSessionPrefix); ok {
				h.log.Info("warm command connection", "warm_key", key, "host", c.Host, "port", c.Port, "decision", c.Decision, "rule", c.Rule)
				return
			}
			h.mu.Lock()
			b := h.boxes[session]
			h.mu.Unlock()
			if b != nil && b.events != nil {
				b.emit(KindNetConnection, c)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	return nil
}

// prepareNetwork makes a new sandbox's network namespace in dir, with its resolver and trust
// bundle, and returns the mounts that put them in place.
func (h *Host) prepareNetwork(dir string, lowerDirs []string) (*sandboxnet.Namespace, []container.Mount, error) {
	// On the sandbox's disk, like its run dir, so that the bind mounts' root fields in its mount
	// table read /net/..., not the host's path of the sandbox dir.
	netDir := filepath.Join(container.DiskDir(dir), "net")
	if err := os.Mkdir(netDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("sandbox network: %w", err)
	}
	resolv := filepath.Join(netDir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(sandboxnet.ResolvConf), 0o644); err != nil {
		return nil, nil, fmt.Errorf("sandbox network: %w", err)
	}
	bundle := filepath.Join(netDir, "ca-certificates.crt")
	// The operator's CA too: a sandbox's client that speaks TLS to the operator's gateway itself
	// (the proxy passes its connection through) verifies it by that CA.
	if err := os.WriteFile(bundle, trustOf(lowerDirs, h.ca.CertPEM(), h.opts.Config.SandboxEgressCA), 0o644); err != nil {
		return nil, nil, fmt.Errorf("sandbox network: %w", err)
	}
	ns, err := sandboxnet.Create(container.NetNSPath(dir))
	if err != nil {
		return nil, nil, err
	}
	return ns, []container.Mount{
		{Source: resolv, Destination: resolvConfPath, ReadOnly: true},
		{Source: bundle, Destination: trustBundle, ReadOnly: true},
	}, nil
}

// trustOf is the image's system trust bundle (from its topmost layer that has one) with the
// interception CA and the operator's (if any) appended.
func trustOf(lowerDirs []string, ca, operatorCA []byte) []byte {
	var out bytes.Buffer
found:
	for _, dir := range lowerDirs {
		for _, rel := range imageBundles {
			// Read only regular files: a layer's symlink must not make the host read its own files.
			p := filepath.Join(dir, rel)
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
				if b, err := os.ReadFile(p); err == nil {
					out.Write(b)
					if len(b) > 0 && b[len(b)-1] != '\n' {
						out.WriteByte('\n')
					}
					break found
				}
			}
		}
	}
	out.Write(ca)
	if len(operatorCA) > 0 {
		out.WriteByte('\n')
		out.Write(operatorCA)
	}
	return out.Bytes()
}

// networkEnv points every client in the sandbox at the proxy and the trust bundle.
func networkEnv() map[string]string {
	env := map[string]string{
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = sandboxnet.ProxyURL
	}
	for _, k := range []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"} {
		env[k] = trustBundle
	}
	return env
}

// proxySession is what the proxy needs of a session's network; a secret that stands for an
// OAuth credential takes its value from tokens when a request carries it.
func proxySession(id string, n *hostv1.SandboxNetwork, tokens *accessTokens) egressproxy.Session {
	s := egressproxy.Session{ID: id}
	if n == nil {
		return s
	}
	s.Rules = egressproxy.Rules{DefaultAllow: n.GetDefaultAllow(), AllowHosts: n.GetAllowHosts(), AllowHostPatterns: n.GetAllowHostPatterns()}
	for _, ps := range n.GetSecrets() {
		sec := egressproxy.Secret{
			Name: ps.GetName(), Placeholder: ps.GetPlaceholder(), Value: ps.GetValue(),
			AllowHosts: ps.GetAllowHosts(), AllowHostPatterns: ps.GetAllowHostPatterns(), Slots: egressproxy.APIKeySlots,
		}
		if slots := ps.GetSlots(); len(slots) > 0 {
			sec.Slots = make([]egressproxy.Slot, len(slots))
			for i, sl := range slots {
				sec.Slots[i] = egressproxy.Slot{Header: sl.GetHeader(), Scheme: sl.GetScheme(), Query: sl.GetQuery()}
			}
		}
		if c := ps.GetCredential(); c != nil {
			sec.Current = tokens.current(c)
		}
		s.Secrets = append(s.Secrets, sec)
	}
	return s
}

// openNetwork is a session record's sealed egress; a record without one lets nothing out.
func openNetwork(sealer *seal.Sealer, rec *sessiondb.Record) (*hostv1.SandboxNetwork, error) {
	n := &hostv1.SandboxNetwork{}
	if len(rec.SealedNetwork) == 0 {
		return n, nil
	}
	b, err := sealer.Open(rec.SealedNetwork, sessiondb.NetworkOwner(rec.ID))
	if err != nil {
		return nil, fmt.Errorf("open the network of %s: %w", rec.ID, err)
	}
	if err := proto.Unmarshal(b, n); err != nil {
		return nil, fmt.Errorf("open the network of %s: %w", rec.ID, err)
	}
	return n, nil
}
