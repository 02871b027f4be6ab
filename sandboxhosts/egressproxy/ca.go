package egressproxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// CA is the deployment's interception authority: the proxy terminates TLS with leaf
// certificates it signs for the hosts a secret is injected into, and sandboxes trust it.
// It is made once (NewCA) and kept sealed (the host seals MarshalPEM's output with
// platform/seal); its key never enters a sandbox.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu     sync.Mutex
	leaves map[string][]tls.Certificate
}

// caValidity is how long a new CA is valid; leafValidity how long a leaf is, and leaves are
// signed again when less than a day of it is left.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 7 * 24 * time.Hour
)

// NewCA makes a new interception CA.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("interception CA: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Hangar egress proxy CA", Organization: []string{"Hangar"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("interception CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("interception CA: %w", err)
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), leaves: map[string][]tls.Certificate{}}, nil
}

// MarshalPEM is the CA's certificate and key, to be sealed at rest.
func (ca *CA) MarshalPEM() ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(nil), ca.pem...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})...), nil
}

// ParseCA reads what MarshalPEM wrote.
func ParseCA(b []byte) (*CA, error) {
	ca := &CA{leaves: map[string][]tls.Certificate{}}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("interception CA: %w", err)
			}
			ca.cert, ca.pem = c, pem.EncodeToMemory(blk)
		case "EC PRIVATE KEY":
			k, err := x509.ParseECPrivateKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("interception CA: %w", err)
			}
			ca.key = k
		}
	}
	if ca.cert == nil || ca.key == nil {
		return nil, errors.New("interception CA: want a certificate and an EC private key")
	}
	return ca, nil
}

// CertPEM is the CA's certificate, which sandboxes trust.
func (ca *CA) CertPEM() []byte { return ca.pem }

// leaf returns the certificates for host signed by the CA, cached until they near their end:
// an ECDSA P-256 one first, which costs a handshake a fraction of what RSA does, and an RSA one
// for small TLS clients (busybox wget among them) that sign-check RSA only. The TLS server picks
// the first the client supports.
func (ca *CA) leaf(host string) ([]tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[host]; c != nil && time.Until(c[0].Leaf.NotAfter) > 24*time.Hour {
		return c, nil
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	certs := make([]tls.Certificate, 0, 2)
	for _, key := range []crypto.Signer{ecKey, rsaKey} {
		c, err := ca.sign(host, key)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	ca.leaves[host] = certs
	return certs, nil
}

// sign makes a leaf certificate for host with key.
func (ca *CA) sign(host string, key crypto.Signer) (tls.Certificate, error) {
	now := time.Now()
	usage := x509.KeyUsageDigitalSignature
	if _, ok := key.(*rsa.PrivateKey); ok {
		usage |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     usage,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	// A host reached by its IP literal (an operator's gateway at a private address) is named
	// by an IP SAN, which is what clients check for one.
	if ip := net.ParseIP(host); ip != nil {
		tmpl.DNSNames, tmpl.IPAddresses = nil, []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("leaf certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
