package certs

import (
	"crypto/tls"
	"crypto/x509"
	"time"

	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
)

// TrustCheckInterval is how often a Manager with Config.Roots looks for a
// new CA bundle (a cheap pointer comparison; the certificate is verified
// only when the bundle changed).
const TrustCheckInterval = 10 * time.Second

// Roots is what the manager's callers trust: *trust.Bundle, kept equal to
// the CA bundle ConfigMap by trust.WatchConfigMaps, is one.
type Roots interface {
	// Pool returns the trusted CA certificates, nil while none is known.
	// New content gives a new pool; the same pool means no change.
	Pool() *x509.CertPool
}

// trustState is what the renewal loop knows of the held certificate's
// trust.
type trustState struct {
	// checked is the last pool the held certificate was verified
	// against: it is verified again only when the pool changes.
	checked *x509.CertPool
	// untrusted says that the held certificate failed that check and is
	// to be renewed now; a successful renewal clears it.
	untrusted bool
}

// CheckTrust asks the renewal loop to look at Config.Roots now rather than
// at its next TrustCheckInterval: to be called once the bundle has been
// loaded. It never blocks.
func (m *Manager) CheckTrust() {
	select {
	case m.checkTrust <- struct{}{}:
	default:
	}
}

// untrusted tells whether the held certificate is to be renewed now
// because the callers no longer trust it: it did not verify against the
// bundle of Config.Roots the last time the bundle changed, and has not
// been renewed since. An unknown (empty) bundle says nothing: the
// certificate is kept.
func (m *Manager) untrusted(logger klog.Logger, ts *trustState) bool {
	if ts.untrusted || m.cfg.Roots == nil {
		return ts.untrusted
	}
	pool, cert := m.cfg.Roots.Pool(), m.Current()
	if pool == nil || pool == ts.checked || cert == nil {
		return false
	}
	ts.checked = pool
	if err := m.verify(cert, pool); err != nil {
		ts.untrusted = true
		logger.Info("The serving certificate does not chain to the CA bundle the callers trust (the product was reinstalled, or its CA was removed from the bundle); renewing it now, serving it until then",
			"issuer", cert.Leaf.Issuer.CommonName, "notAfter", cert.Leaf.NotAfter, "reason", err.Error())
	}
	return ts.untrusted
}

// verify checks cert as the callers do (managerapi.WithServerTLS): a chain to
// pool, for the node's server name, for server auth, now on the Manager's
// clock.
func (m *Manager) verify(cert *tls.Certificate, pool *x509.CertPool) error {
	intermediates := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			intermediates.AddCert(c)
		}
	}
	_, err := cert.Leaf.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: intermediates,
		DNSName:       managerapi.ServerName(m.cfg.NodeName),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		CurrentTime:   m.cfg.Clock.Now(),
	})
	return err
}
