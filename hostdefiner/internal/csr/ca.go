package csr

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

const (
	// CAValidity is the lifetime of a CA the Authority creates.
	CAValidity = 10 * 365 * 24 * time.Hour
	// ClockSkew is how long before now a certificate starts, for clocks
	// behind ours: at most a tenth of a leaf's lifetime, so that a short
	// certificate is not already near its renewal time (70% of its life
	// from NotBefore) when it is issued.
	ClockSkew = 5 * time.Minute
	// caCommonNamePrefix starts a created CA's common name; the unix time
	// of its creation follows.
	caCommonNamePrefix = "hostpath-manager-ca@"

	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY"
	pemRequest     = "CERTIFICATE REQUEST"
)

// CA is a certificate authority: its certificate and private key, and both
// in PEM as they are stored.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA returns a new self-signed CA (ECDSA P-256) valid from now for
// CAValidity.
func NewCA(now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s%d", caCommonNamePrefix, now.Unix())},
		NotBefore:             now.Add(-ClockSkew),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign the CA: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode the CA key: %w", err)
	}
	return ParseCA(encodePEM(pemCertificate, der), encodePEM(pemPrivateKey, keyDER))
}

// ParseCA parses a CA certificate and its key (PKCS#8, PKCS#1 or SEC 1) in
// PEM and checks that they match and that the certificate may sign
// certificates.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse the CA: %w", err)
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse the CA certificate: %w", err)
		}
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the CA key (%T) cannot sign", pair.PrivateKey)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid || cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("the certificate %q is not a CA that may sign certificates", cert.Subject)
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Sign issues a serving certificate, in PEM, for the checked request req:
// valid from ClockSkew (at most a tenth of lifetime) before now for
// lifetime, but not after the CA.
func (ca *CA) Sign(req *x509.CertificateRequest, now time.Time, lifetime time.Duration) ([]byte, error) {
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("the CA %q expired at %s", ca.Cert.Subject, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	usage := x509.KeyUsageDigitalSignature
	if _, ok := req.PublicKey.(*rsa.PublicKey); ok {
		usage |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               req.Subject,
		DNSNames:              req.DNSNames,
		NotBefore:             now.Add(-min(ClockSkew, lifetime/10)),
		NotAfter:              notAfter,
		KeyUsage:              usage,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return encodePEM(pemCertificate, der), nil
}

// randomSerial returns a random, positive serial number of 128 bits.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("a serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// encodePEM encodes der as one PEM block of type typ.
func encodePEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// encodeCerts encodes certs as PEM, in order.
func encodeCerts(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		b.Write(encodePEM(pemCertificate, c.Raw))
	}
	return b.Bytes()
}

// parseCerts parses every CERTIFICATE block of data; it fails on anything
// else.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != pemCertificate {
			return nil, fmt.Errorf("a PEM block of type %q, want %q", block.Type, pemCertificate)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		return nil, errors.New("data that is not PEM")
	}
	return certs, nil
}

// fingerprint is a certificate's SHA-256, in hex, to name it in logs.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}
