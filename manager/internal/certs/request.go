package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/pkg/client"
)

// The subject of a manager's CSR. The approver checks the DNS name, not
// these; they name the requester in `kubectl get csr` and in audit logs.
const (
	// CommonNamePrefix is followed by the node name.
	CommonNamePrefix = "system:hostpath-manager:"
	// Organization is the subject's one organization.
	Organization = "hostpath.dev:managers"
)

// Usages are the key usages a manager's CSR asks for. An ECDSA key signs
// the TLS handshake; it enciphers nothing, so no key encipherment.
var Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}

// Template returns the x509 CSR template of node: subject and DNS name,
// nothing else.
func Template(node string) *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: CommonNamePrefix + node, Organization: []string{Organization}},
		DNSNames: []string{client.ServerName(node)},
	}
}

// renew gets a new certificate with a new key through a CSR, stores it and
// serves it from then on. On error, the current certificate stays.
func (m *Manager) renew(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate a key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, Template(m.cfg.NodeName), key)
	if err != nil {
		return fmt.Errorf("make the CSR: %w", err)
	}
	csrPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	lifetime := m.cfg.Lifetime
	name, uid, err := csr.RequestCertificateWithContext(ctx, m.cfg.Client, csrPEM, "", client.SignerName, &lifetime, Usages, key)
	if err != nil {
		return fmt.Errorf("create a CertificateSigningRequest: %w", err)
	}
	logger.Info("Requested a serving certificate; waiting for it to be approved and signed", "csr", name, "signer", client.SignerName, "serverName", client.ServerName(m.cfg.NodeName))
	wctx, cancel := context.WithTimeout(ctx, m.cfg.WaitTimeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, m.cfg.Client, name, uid)
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("CertificateSigningRequest %s was not signed within %s (is the host definer running?)", name, m.cfg.WaitTimeout)
		}
		return fmt.Errorf("CertificateSigningRequest %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode the key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := parse(certPEM, keyPEM)
	if err == nil {
		err = m.check(cert)
	}
	if err != nil {
		return fmt.Errorf("CertificateSigningRequest %s gave an unusable certificate: %w", name, err)
	}
	if err := store(m.cfg.Dir, append(certPEM, keyPEM...)); err != nil {
		// Served anyway: only a restart needs the file, and it then asks
		// for a new certificate.
		logger.Error(err, "Cannot store the serving certificate; a restart will request a new one", "dir", m.cfg.Dir)
	}
	m.serve(cert)
	logger.Info("Serving with a new certificate", "csr", name, "issuer", cert.Leaf.Issuer.CommonName, "notAfter", cert.Leaf.NotAfter, "renewAfter", renewAfter(cert.Leaf))
	return nil
}

// parse makes a tls.Certificate with its Leaf from PEM data; the key must
// match the first certificate.
func parse(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &cert, nil
}

// check tells whether cert can be served now: valid now, for exactly the
// node's server name (no other name or address), for server auth.
func (m *Manager) check(cert *tls.Certificate) error {
	leaf, now := cert.Leaf, m.cfg.Clock.Now()
	want := client.ServerName(m.cfg.NodeName)
	switch {
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(leaf.NotAfter):
		return fmt.Errorf("expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != want || len(leaf.IPAddresses) > 0 || len(leaf.URIs) > 0 || len(leaf.EmailAddresses) > 0:
		return fmt.Errorf("its names are DNS %q, IP %v, URI %v, email %q; want only DNS %q", leaf.DNSNames, leaf.IPAddresses, leaf.URIs, leaf.EmailAddresses, want)
	case !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth):
		return fmt.Errorf("not for server auth (extended key usages %v)", leaf.ExtKeyUsage)
	}
	return nil
}

// renewAfter is when leaf is renewed: RenewFraction of its life.
func renewAfter(leaf *x509.Certificate) time.Time {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(time.Duration(float64(life) * RenewFraction))
}
