// Package certstest helps test the manager's serving certificates: a test
// CA, and a fake clientset whose CertificateSigningRequests are approved
// and signed by that CA (or denied, or held until the test approves them),
// as the host definer would. Only tests import it.
package certstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	typedcertificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
)

// CA is a self-signed test CA.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is Cert in PEM, the bundle callers would trust.
	PEM []byte
}

// NewCA makes a CA with common name cn, valid for ten years from an hour
// ago.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is a certificate pool of the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// issue signs a serving certificate for pub with subject and DNS names.
func (ca *CA) issue(pub any, subject pkix.Name, dnsNames []string, notBefore time.Time, lifetime time.Duration) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		DNSNames:     dnsNames,
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// Sign signs a PEM CSR as the host definer would: its subject and DNS
// names, server auth, from notBefore for lifetime.
func (ca *CA) Sign(csrPEM []byte, notBefore time.Time, lifetime time.Duration) ([]byte, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("not a PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	return ca.issue(req.PublicKey, req.Subject, req.DNSNames, notBefore, lifetime)
}

// ServingPEM returns a certificate for the manager of node (its DNS names
// are dnsNames, managerapi.ServerName(node) when none) followed by its key, in
// PEM: what the manager stores.
func (ca *CA) ServingPEM(node string, notBefore time.Time, lifetime time.Duration, dnsNames ...string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if len(dnsNames) == 0 {
		dnsNames = []string{managerapi.ServerName(node)}
	}
	certPEM, err := ca.issue(key.Public(), pkix.Name{CommonName: "system:hostpath-manager:" + node}, dnsNames, notBefore, lifetime)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...), nil
}

// Mode is what the Signer does with a new CSR.
type Mode int

const (
	// Sign approves and signs it at once.
	Sign Mode = iota
	// Deny denies it at once.
	Deny
	// Hold leaves it pending until Approve.
	Hold
)

var (
	csrResource = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	csrKind     = certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest")
)

// Signer is a fake clientset whose CSRs its CA signs. Its CSR list and
// watch honour the metadata.name field selector (the plain fake's do not),
// as csr.WaitForCertificate needs.
type Signer struct {
	CA        *CA
	Clientset *fake.Clientset

	clock    clock.PassiveClock
	watching chan string

	mu      sync.Mutex
	mode    Mode
	created int
}

// NewSigner returns a Signer in mode Sign whose certificates start at
// clk's time and last the CSR's expirationSeconds (an hour without).
func NewSigner(ca *CA, clk clock.PassiveClock) *Signer {
	s := &Signer{CA: ca, Clientset: fake.NewClientset(), clock: clk, watching: make(chan string, 100)}
	s.Clientset.PrependReactor("create", "certificatesigningrequests", onlyV1(s.create))
	s.Clientset.PrependReactor("list", "certificatesigningrequests", onlyV1(s.list))
	s.Clientset.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if a.GetResource() != csrResource {
			return false, nil, nil
		}
		return s.watch(a)
	})
	return s
}

// SetMode sets what is done with the next CSRs.
func (s *Signer) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// Created is the number of CSRs created so far.
func (s *Signer) Created() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}

// Watching receives the name of a CSR each time a watch of it starts.
func (s *Signer) Watching() <-chan string { return s.watching }

// CSRs is the fake clientset's CertificateSigningRequests client, for a
// certs.Manager. Like the fake clientset, it says that its watch cannot
// stream the initial list, so that the manager's informer lists first.
func (s *Signer) CSRs() typedcertificatesv1.CertificateSigningRequestInterface {
	return noWatchList{s.Clientset.CertificatesV1().CertificateSigningRequests()}
}

// noWatchList is a fake's typed client that declines client-go's
// WatchListClient streaming, which the fake's watch does not do.
type noWatchList struct {
	typedcertificatesv1.CertificateSigningRequestInterface
}

// IsWatchListSemanticsUnSupported is true: list, then watch.
func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// Requests lists the CSRs.
func (s *Signer) Requests(ctx context.Context) ([]certificatesv1.CertificateSigningRequest, error) {
	l, err := s.Clientset.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Approve approves and signs the held CSR name.
func (s *Signer) Approve(name string) error {
	obj, err := s.Clientset.Tracker().Get(csrResource, "", name)
	if err != nil {
		return err
	}
	req := obj.(*certificatesv1.CertificateSigningRequest).DeepCopy()
	if err := s.sign(req); err != nil {
		return err
	}
	return s.Clientset.Tracker().Update(csrResource, req, "")
}

// sign approves req and sets its certificate.
func (s *Signer) sign(req *certificatesv1.CertificateSigningRequest) error {
	lifetime := time.Hour
	if req.Spec.ExpirationSeconds != nil {
		lifetime = time.Duration(*req.Spec.ExpirationSeconds) * time.Second
	}
	cert, err := s.CA.Sign(req.Spec.Request, s.clock.Now(), lifetime)
	if err != nil {
		return err
	}
	req.Status.Conditions = append(req.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: "True", Reason: "TestApproved", Message: "approved by the test",
	})
	req.Status.Certificate = cert
	return nil
}

// create names, stores and, by the mode, signs or denies a new CSR.
func (s *Signer) create(a k8stesting.Action) (bool, runtime.Object, error) {
	req := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest).DeepCopy()
	s.mu.Lock()
	s.created++
	n, mode := s.created, s.mode
	s.mu.Unlock()
	if req.Name == "" {
		req.Name = fmt.Sprintf("%s%d", req.GenerateName, n)
	}
	req.UID = types.UID(fmt.Sprintf("uid-%d", n))
	switch mode {
	case Sign:
		if err := s.sign(req); err != nil {
			return true, nil, err
		}
	case Deny:
		req.Status.Conditions = append(req.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: "True", Reason: "TestDenied", Message: "denied by the test",
		})
	}
	if err := s.Clientset.Tracker().Create(csrResource, req, ""); err != nil {
		return true, nil, err
	}
	return true, req, nil
}

// list lists the CSRs the field selector metadata.name picks.
func (s *Signer) list(a k8stesting.Action) (bool, runtime.Object, error) {
	name := selectedName(a.(k8stesting.ListAction).GetListRestrictions().Fields)
	obj, err := s.Clientset.Tracker().List(csrResource, csrKind, "")
	if err != nil || name == "" {
		return true, obj, err
	}
	l := obj.(*certificatesv1.CertificateSigningRequestList)
	var items []certificatesv1.CertificateSigningRequest
	for _, r := range l.Items {
		if r.Name == name {
			items = append(items, r)
		}
	}
	l.Items = items
	return true, l, nil
}

// watch watches the CSRs the field selector metadata.name picks.
func (s *Signer) watch(a k8stesting.Action) (bool, watch.Interface, error) {
	name := selectedName(a.(k8stesting.WatchAction).GetWatchRestrictions().Fields)
	w, err := s.Clientset.Tracker().Watch(csrResource, "")
	if err != nil {
		return true, nil, err
	}
	select {
	case s.watching <- name:
	default:
	}
	if name == "" {
		return true, w, nil
	}
	return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		o, ok := e.Object.(metav1.Object)
		return e, ok && o.GetName() == name
	}), nil
}

// selectedName is the name a metadata.name field selector picks; "" for
// any.
func selectedName(sel fields.Selector) string {
	if sel == nil {
		return ""
	}
	name, _ := sel.RequiresExactMatch("metadata.name")
	return name
}

// onlyV1 lets f handle only certificates.k8s.io/v1 CSRs.
func onlyV1(f k8stesting.ReactionFunc) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetResource() != csrResource {
			return false, nil, nil
		}
		return f(a)
	}
}
