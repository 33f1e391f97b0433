// Package trusttest makes certificate authorities and serving certificates
// for tests of the managers' transport security: a CA as in the CA
// bundle, and the certificates a manager would serve.
package trusttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	// Cert is the CA's self-signed certificate.
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// chain is what a server sends after its own certificate: the
	// intermediate CAs from this one up, without the root.
	chain [][]byte
}

// NewCA returns a new root CA named name, valid from an hour ago for a
// day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := caTemplate(t, name)
	return &CA{Cert: create(t, tmpl, tmpl, key, key), key: key}
}

// NewIntermediate returns a new CA named name signed by ca; the servers
// it signs send its certificate (and those above it but the root) after
// their own.
func (ca *CA) NewIntermediate(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	cert := create(t, caTemplate(t, name), ca.Cert, key, ca.key)
	return &CA{Cert: cert, key: key, chain: append([][]byte{cert.Raw}, ca.chain...)}
}

func caTemplate(t testing.TB, name string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

// create signs tmpl, for key, by parent with parentKey.
func create(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// PEM returns the CA's certificate in PEM, as in the CA bundle.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool returns a pool that holds the CA's certificate only.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ServerCert returns a serving certificate (server authentication, valid
// from an hour ago for an hour) for dnsNames, signed by the CA, with its
// key, as a tls.Config's Certificates take it.
func (ca *CA) ServerCert(t testing.TB, dnsNames ...string) tls.Certificate {
	t.Helper()
	now := time.Now()
	return ca.Issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "test server"},
		DNSNames:    dnsNames,
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Issue returns a certificate made from tmpl (a serial number is added
// when it has none), signed by the CA, with a new key, followed by the
// CA's chain.
func (ca *CA) Issue(t testing.TB, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = serial(t)
	}
	key := newKey(t)
	leaf := create(t, tmpl, ca.Cert, key, ca.key)
	return tls.Certificate{Certificate: append([][]byte{leaf.Raw}, ca.chain...), PrivateKey: key, Leaf: leaf}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
