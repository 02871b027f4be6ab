package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"time"
)

// TLSServer serves h over TLS on 127.0.0.1 with a self-signed certificate for names (and
// 127.0.0.1), so that a client told to trust it (Roots) reaches it under a real host name, as
// the egress proxy's test resolver makes it (api.anthropic.com, a git host): httptest's own
// certificate names only example.com.
func TLSServer(h http.Handler, names ...string) *httptest.Server {
	srv := UnstartedTLSServer(h, names...)
	srv.StartTLS()
	return srv
}

// UnstartedTLSServer is TLSServer not yet started (StartTLS), for a caller to tune first.
func UnstartedTLSServer(h http.Handler, names ...string) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(names)}}
	return srv
}

// Roots is a pool holding the certificate of a server TLSServer (or httptest) started.
func Roots(servers ...*httptest.Server) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, s := range servers {
		pool.AddCert(s.Certificate())
	}
	return pool
}

func selfSigned(names []string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic("testkit: TLS key: " + err.Error())
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "testkit TLS server"},
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic("testkit: TLS certificate: " + err.Error())
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
