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
	"errors"
	"fmt"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/managerapi"
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
		DNSNames: []string{managerapi.ServerName(node)},
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
	req, err := m.cfg.Client.Create(ctx, m.csr(der), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create a CertificateSigningRequest: %w", err)
	}
	name := req.Name
	logger.Info("Requested a serving certificate; waiting for it to be approved and signed", "csr", name, "signer", managerapi.SignerName, "serverName", managerapi.ServerName(m.cfg.NodeName))
	wctx, cancel := context.WithTimeout(ctx, m.cfg.WaitTimeout)
	defer cancel()
	certPEM, err := m.waitForCertificate(wctx, name, req.UID)
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

// csr is the CertificateSigningRequest of the x509 request der: named by
// the API server (csr-XXXXX), for signer managerapi.SignerName, with Usages
// and the configured lifetime.
func (m *Manager) csr(der []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        managerapi.SignerName,
			Usages:            Usages,
			ExpirationSeconds: ptr.To(int32(m.cfg.Lifetime / time.Second)),
		},
	}
}

// waitForCertificate watches the CSR name until it is signed, and returns
// its certificate (PEM). It fails when the CSR is denied, fails, is
// deleted or made again (another uid), or when ctx ends.
func (m *Manager) waitForCertificate(ctx context.Context, name string, uid types.UID) ([]byte, error) {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return m.cfg.Client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return m.cfg.Client.Watch(ctx, opts)
		},
	}
	var certPEM []byte
	_, err := watchtools.UntilWithSync(ctx, cache.ToListWatcherWithWatchListSemantics(lw, m.cfg.Client), &certificatesv1.CertificateSigningRequest{}, nil, func(e watch.Event) (bool, error) {
		switch e.Type {
		case watch.Added, watch.Modified:
		case watch.Deleted:
			return false, errors.New("it was deleted")
		default:
			return false, nil
		}
		req, ok := e.Object.(*certificatesv1.CertificateSigningRequest)
		switch {
		case !ok:
			return false, fmt.Errorf("watch event of a %T", e.Object)
		case req.UID != uid:
			return false, fmt.Errorf("it was made again (uid %s, was %s)", req.UID, uid)
		}
		var err error
		certPEM, err = issued(req)
		return certPEM != nil, err
	})
	if err != nil {
		return nil, err
	}
	return certPEM, nil
}

// issued returns the certificate of req once it is approved and signed,
// nil before, and an error when it is denied or has failed.
func issued(req *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	approved := false
	for _, c := range req.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return nil, fmt.Errorf("denied, reason %q, message %q", c.Reason, c.Message)
		case certificatesv1.CertificateFailed:
			return nil, fmt.Errorf("failed, reason %q, message %q", c.Reason, c.Message)
		case certificatesv1.CertificateApproved:
			approved = true
		}
	}
	if !approved || len(req.Status.Certificate) == 0 {
		return nil, nil
	}
	return req.Status.Certificate, nil
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
	want := managerapi.ServerName(m.cfg.NodeName)
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
