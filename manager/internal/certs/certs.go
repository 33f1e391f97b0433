// Package certs gives the manager its TLS serving certificate, issued by
// the cluster through the CertificateSigningRequest API, and renews it
// without a restart.
//
// Why: callers must know they talk to the real manager of a node, and the
// bearer tokens they send must not cross the pod network in clear text. A
// certificate from the cluster, for a DNS name derived from the node name
// (managerapi.ServerName), lets a caller that trusts the CA bundle verify the
// manager whatever the pod IP is, with no cert-manager and no certificate
// in the manifests.
//
// How, mirroring the kubelet's serving certificate (its
// --rotate-server-certificates and k8s.io/client-go/util/certificate):
//
//   - The key and certificate are kept together in one PEM file, FileName,
//     in a directory on the host (mode 0700, the file 0600, replaced
//     atomically by a rename), and reused across restarts while valid: a
//     manager does not depend on the signer to come back after a restart.
//   - Without a usable stored certificate (none, expired, not yet valid,
//     or for another name), the Manager makes a new ECDSA P-256 key and a
//     CSR for signer managerapi.SignerName, subject CN
//     "system:hostpath-manager:<node>", organization
//     "hostpath.dev:managers", the one DNS name managerapi.ServerName(node),
//     usages digital signature and server auth, expirationSeconds the
//     configured lifetime; it waits for the host definer to approve and
//     sign it, watching that one CSR (a metadata.name field selector), and
//     stores the result and serves it. These are the calls of client-go's
//     csr.RequestCertificate and csr.WaitForCertificate, for the v1 API
//     alone, made through Config.Client: that package takes a whole
//     clientset, which the manager does not link (see internal/kube).
//   - At 70% of the certificate's life it asks again, with a new key. The
//     new certificate replaces the old one atomically (GetCertificate reads
//     an atomic pointer), so connections are never refused during a
//     renewal. A renewal that fails (denied, not answered within
//     WaitTimeout, an API error) leaves the current certificate in place,
//     is logged and reported by Status, and is retried with exponential
//     backoff (10s doubling to 5 minutes). A certificate that expires
//     anyway is no longer served: Current is nil and Ready false.
//   - With Config.Roots (the CA bundle the callers trust, kept by
//     trust.WatchConfigMaps), a certificate that no longer chains to a
//     known bundle is renewed at once, not at 70%: after a reinstall (a
//     new CA) or once an old CA has left the bundle, the stored
//     certificate is valid but every caller refuses it. It is verified as
//     the callers do (roots the bundle, DNS name managerapi.ServerName(node),
//     server auth) whenever the bundle changes (looked at every
//     TrustCheckInterval, and at CheckTrust), and kept in service until
//     its successor is signed. An empty bundle (none published yet, or not
//     readable) says nothing: the certificate is kept.
//
// The key never leaves the host; only the CSR (the public key) goes to the
// API server. The API server fills the CSR's username and extra fields
// (pod name, pod UID, node name) from the pod-bound service account token,
// which the approver checks: all managers share one service account.
package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
)

// Defaults and limits of Config.
const (
	// DefaultLifetime is the certificate lifetime asked for by default.
	DefaultLifetime = 24 * time.Hour
	// MinLifetime is the shortest lifetime the CSR API accepts
	// (spec.expirationSeconds of at least 600).
	MinLifetime = 10 * time.Minute
	// DefaultWaitTimeout bounds the wait for one CSR to be signed (the
	// kubelet's value); a new CSR is made after it.
	DefaultWaitTimeout = 15 * time.Minute
	// RenewFraction is the part of a certificate's life after which it is
	// renewed.
	RenewFraction = 0.7
	// InitialBackoff and MaxBackoff bound the wait before another attempt
	// after a failed one.
	InitialBackoff = 10 * time.Second
	MaxBackoff     = 5 * time.Minute
)

// CSRs is what a Manager calls to get a certificate: the
// CertificateSigningRequests of certificates.k8s.io/v1, as what
// kube.Client's CertificateSigningRequests returns, or a clientset's
// CertificatesV1().CertificateSigningRequests(). Its watch is asked to
// stream the initial list (client-go's WatchListClient) unless it also has a
// method IsWatchListSemanticsUnSupported() bool that returns true, as a
// test's fake must (certstest.Signer's CSRs has it).
type CSRs interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	List(ctx context.Context, opts metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Config is what a Manager needs.
type Config struct {
	// NodeName is the manager's node; the certificate is for
	// managerapi.ServerName(NodeName).
	NodeName string
	// Dir holds FileName (created with mode 0700 if missing).
	Dir string
	// Client creates and watches the CSRs.
	Client CSRs
	// Lifetime is the validity asked for (spec.expirationSeconds);
	// DefaultLifetime when 0. The signer may give less.
	Lifetime time.Duration
	// WaitTimeout bounds the wait for one CSR; DefaultWaitTimeout when 0.
	WaitTimeout time.Duration
	// Clock tells the time of validity checks and renewals; the real
	// clock when nil.
	Clock clock.WithTicker
	// Roots, when set, is what the manager's callers trust (the CA
	// bundle). Whenever it is known (non-empty) and changes, the held
	// certificate is verified against it, and renewed at once if it does
	// not chain to it; nil for no such check.
	Roots Roots
}

// Manager holds the serving certificate and renews it. It is safe for
// concurrent use.
type Manager struct {
	cfg  Config
	cert atomic.Pointer[tls.Certificate]

	mu sync.Mutex
	// lastErr and lastErrTime are the last failed attempt, cleared by a
	// successful one.
	lastErr     error
	lastErrTime time.Time

	started atomic.Bool
	done    chan struct{}
	// obtained is closed when the first certificate is held.
	obtained     chan struct{}
	obtainedOnce sync.Once
	// checkTrust wakes the renewal loop to look at Config.Roots
	// (CheckTrust).
	checkTrust chan struct{}
	// attempted, when set (by tests), receives the result of every
	// attempt.
	attempted chan<- error
}

// New checks cfg and returns a Manager; Start loads the stored certificate
// and starts the renewals.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("certs: no node name")
	case cfg.Dir == "":
		return nil, errors.New("certs: no directory")
	case cfg.Client == nil:
		return nil, errors.New("certs: no API client")
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Lifetime < MinLifetime {
		return nil, fmt.Errorf("certs: the lifetime %s is shorter than %s, the least the CSR API accepts", cfg.Lifetime, MinLifetime)
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg, done: make(chan struct{}), obtained: make(chan struct{}), checkTrust: make(chan struct{}, 1)}, nil
}

// Start prepares the directory, takes the stored certificate if it is
// usable, and starts the loop that gets a certificate (at once when none is
// usable) and renews it until ctx ends. It fails only when the directory
// cannot be made; call it once.
func (m *Manager) Start(ctx context.Context) error {
	if !m.started.CompareAndSwap(false, true) {
		return errors.New("certs: Start called twice")
	}
	logger := klog.FromContext(ctx)
	if err := prepareDir(m.cfg.Dir); err != nil {
		close(m.done)
		return err
	}
	cert, err := load(m.path())
	if err == nil {
		err = m.check(cert)
	}
	switch {
	case err == nil:
		m.serve(cert)
		logger.Info("Serving with the stored certificate", "file", m.path(), "notAfter", cert.Leaf.NotAfter, "renewAfter", renewAfter(cert.Leaf))
	case errors.Is(err, errNotStored):
		logger.Info("No stored serving certificate; requesting one", "signer", managerapi.SignerName, "serverName", managerapi.ServerName(m.cfg.NodeName))
	default:
		logger.Info("The stored serving certificate cannot be used; requesting a new one", "file", m.path(), "reason", err.Error())
	}
	go m.run(ctx)
	return nil
}

// serve makes cert the one served.
func (m *Manager) serve(cert *tls.Certificate) {
	m.cert.Store(cert)
	m.obtainedOnce.Do(func() { close(m.obtained) })
}

// Obtained is closed once the Manager holds its first certificate (the
// stored one, or the first one signed).
func (m *Manager) Obtained() <-chan struct{} { return m.obtained }

// Done is closed when the loop Start started has stopped (after its
// context ended).
func (m *Manager) Done() <-chan struct{} { return m.done }

// Current returns the certificate to serve, with its Leaf; nil while none
// is held or once it has expired.
func (m *Manager) Current() *tls.Certificate {
	c := m.cert.Load()
	if c == nil || !m.cfg.Clock.Now().Before(c.Leaf.NotAfter) {
		return nil
	}
	return c
}

// Ready reports whether a valid certificate is held, that is whether /v1
// can be served.
func (m *Manager) Ready() bool { return m.Current() != nil }

// GetCertificate is the tls.Config hook: the current certificate, or an
// error (the handshake fails) while none is held.
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := m.Current(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet: waiting for the CSR to be approved and signed")
}

// TLSConfig returns the server's TLS configuration: the Manager's
// certificate, TLS 1.2 at least (1.3 is negotiated when the client has
// it).
func (m *Manager) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: m.GetCertificate}
}

// Status describes the certificate held (even an expired one) and the
// last failed attempt, for GET /v1/host.
func (m *Manager) Status() *managerapi.CertificateStatus {
	st := &managerapi.CertificateStatus{}
	if c := m.cert.Load(); c != nil {
		nb, na, ra := c.Leaf.NotBefore, c.Leaf.NotAfter, renewAfter(c.Leaf)
		st.NotBefore, st.NotAfter, st.RenewAfter = &nb, &na, &ra
		st.Issuer = c.Leaf.Issuer.CommonName
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr != nil {
		t := m.lastErrTime
		st.RenewalError, st.RenewalErrorTime = m.lastErr.Error(), &t
	}
	return st
}

// record keeps the outcome of an attempt for Status.
func (m *Manager) record(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastErr = err
	m.lastErrTime = m.cfg.Clock.Now()
}

// run gets a certificate when none is held and renews it at its renewal
// time, or at once when the callers no longer trust it, until ctx ends;
// failed attempts are retried with backoff.
func (m *Manager) run(ctx context.Context) {
	defer close(m.done)
	logger := klog.FromContext(ctx)
	backoff := InitialBackoff
	var trust trustState
	for {
		if !m.waitForRenewal(ctx, &trust) {
			return
		}
		err := m.renew(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil && m.untilRenewal() <= 0 {
			// Served, but renewing it at once would loop without pause.
			err = errors.New("the signed certificate is already due for renewal (70% of its life has passed)")
		}
		m.record(err)
		if m.attempted != nil {
			select {
			case m.attempted <- err:
			case <-ctx.Done():
				return
			}
		}
		if err == nil {
			backoff, trust.untrusted = InitialBackoff, false
			continue
		}
		if c := m.Current(); c != nil {
			logger.Error(err, "Cannot renew the serving certificate; still serving with the current one", "notAfter", c.Leaf.NotAfter, "retryIn", backoff)
		} else {
			logger.Error(err, "Cannot get a serving certificate; /v1 is not served until one is signed", "retryIn", backoff)
		}
		if !m.sleep(ctx, backoff, nil) {
			return
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// untilRenewal is the time left before the held certificate is renewed; 0
// without one.
func (m *Manager) untilRenewal() time.Duration {
	c := m.Current()
	if c == nil {
		return 0
	}
	return renewAfter(c.Leaf).Sub(m.cfg.Clock.Now())
}

// waitForRenewal waits until the held certificate is to be renewed: at
// once without one, at its renewal time, or as soon as it does not chain
// to a new bundle of Config.Roots (looked at every TrustCheckInterval and
// at CheckTrust). false when ctx ended first.
func (m *Manager) waitForRenewal(ctx context.Context, trust *trustState) bool {
	logger := klog.FromContext(ctx)
	for {
		d := m.untilRenewal()
		if d <= 0 || m.untrusted(logger, trust) {
			return ctx.Err() == nil
		}
		if m.cfg.Roots != nil {
			d = min(d, TrustCheckInterval)
		}
		if !m.sleep(ctx, d, m.checkTrust) {
			return false
		}
	}
}

// sleep waits d on the Manager's clock, or until wake receives (never when
// nil); false when ctx ended first.
func (m *Manager) sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := m.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	case <-wake:
		return true
	}
}
