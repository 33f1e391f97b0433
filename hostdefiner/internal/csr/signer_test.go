package csr

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
)

// approved marks csr approved.
func approved(csr *certv1.CertificateSigningRequest) *certv1.CertificateSigningRequest {
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: v1.ConditionTrue, Reason: ReasonApproved,
	})
	return csr
}

// withCA runs the Authority once, so that the fixture has a CA, and
// returns it.
func (f *fixture) withCA() *CA {
	f.t.Helper()
	if _, err := f.c.Authority.sync(f.ctx); err != nil {
		f.t.Fatalf("the Authority's sync: %v", err)
	}
	f.refresh()
	f.kube.ClearActions()
	s := f.getSecret()
	ca, err := ParseCA(s.Data[v1.TLSCertKey], s.Data[v1.TLSPrivateKeyKey])
	if err != nil {
		f.t.Fatal(err)
	}
	return ca
}

// sign runs the Signer on the CSR name and returns its certificate.
func (f *fixture) sign(name string) *x509.Certificate {
	f.t.Helper()
	if err := f.c.Signer.Sync(f.ctx, name); err != nil {
		f.t.Fatalf("Sync() = %v", err)
	}
	got := f.getCSR(name)
	if c := condition(got, certv1.CertificateFailed); c != nil {
		f.t.Fatalf("Failed: %s: %s", c.Reason, c.Message)
	}
	certs, err := parseCerts(got.Status.Certificate)
	if err != nil || len(certs) != 1 {
		f.t.Fatalf("status.certificate: %d certificates, %v", len(certs), err)
	}
	return certs[0]
}

func TestSignerValidity(t *testing.T) {
	tests := []struct {
		name string
		// expiration is spec.expirationSeconds (nil: none); maxLifetime
		// the cap; age is the CA's age at signing.
		expiration  *int32
		maxLifetime time.Duration
		age         time.Duration
		want        time.Duration // NotAfter - now
	}{
		{name: "default lifetime", maxLifetime: 24 * time.Hour, want: 24 * time.Hour},
		{name: "expirationSeconds", expiration: ptr.To[int32](3600), maxLifetime: 24 * time.Hour, want: time.Hour},
		{name: "capped by the maximum", expiration: ptr.To[int32](7 * 24 * 3600), maxLifetime: 24 * time.Hour, want: 24 * time.Hour},
		{name: "default capped by a short maximum", maxLifetime: 10 * time.Minute, want: 10 * time.Minute},
		{name: "capped by the CA's end", maxLifetime: 24 * time.Hour, age: CAValidity - time.Hour, want: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := approved(newCSR("csr-1", managerRequest(t, node1).pem(t)))
			csr.Spec.ExpirationSeconds = tc.expiration
			f := newFixture(t, csr)
			f.c.Signer.cfg.MaxLifetime = tc.maxLifetime
			ca := f.withCA()
			f.clock.Step(tc.age)
			now := f.clock.Now()
			cert := f.sign(csr.Name)
			// The skew is at most a tenth of the lifetime (the short row).
			if skew := min(ClockSkew, tc.want/10); !cert.NotBefore.Equal(now.Add(-skew)) {
				t.Errorf("NotBefore = %s, want now - %s", cert.NotBefore, skew)
			}
			if got := cert.NotAfter.Sub(now); got != tc.want {
				t.Errorf("NotAfter = now + %s, want now + %s", got, tc.want)
			}
			if cert.NotAfter.After(ca.Cert.NotAfter) {
				t.Errorf("NotAfter %s is after the CA's %s", cert.NotAfter, ca.Cert.NotAfter)
			}
		})
	}
}

func TestSignerCertificate(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		rsa       bool
		wantUsage x509.KeyUsage
	}{
		{name: "ECDSA", wantUsage: x509.KeyUsageDigitalSignature},
		{name: "RSA", rsa: true, wantUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := managerRequest(t, node1)
			if tc.rsa {
				r.key = rsaKey
			}
			csr := approved(newCSR("csr-1", r.pem(t)))
			f := newFixture(t, csr)
			ca := f.withCA()
			cert := f.sign(csr.Name)
			if w := hostpathtest.DescribeWrites(f.kube.Actions()); !slices.Equal(w, []string{"update certificatesigningrequests/status csr-1"}) {
				t.Errorf("writes = %q, want one status update", w)
			}
			if cert.KeyUsage != tc.wantUsage {
				t.Errorf("KeyUsage = %b, want %b", cert.KeyUsage, tc.wantUsage)
			}
			if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || len(cert.UnknownExtKeyUsage) > 0 {
				t.Errorf("ExtKeyUsage = %v, want [server auth]", cert.ExtKeyUsage)
			}
			if cert.IsCA || !cert.BasicConstraintsValid {
				t.Errorf("IsCA = %v, BasicConstraintsValid = %v, want a leaf", cert.IsCA, cert.BasicConstraintsValid)
			}
			if !slices.Equal(cert.DNSNames, []string{managerapi.ServerName(node1)}) || len(cert.IPAddresses)+len(cert.EmailAddresses)+len(cert.URIs) > 0 {
				t.Errorf("SANs = %q %v %q %v, want [%q]", cert.DNSNames, cert.IPAddresses, cert.EmailAddresses, cert.URIs, managerapi.ServerName(node1))
			}
			if cert.Subject.CommonName != CommonNamePrefix+node1 || !slices.Equal(cert.Subject.Organization, []string{Organization}) {
				t.Errorf("Subject = %s", cert.Subject)
			}
			if string(cert.AuthorityKeyId) != string(ca.Cert.SubjectKeyId) || len(ca.Cert.SubjectKeyId) == 0 {
				t.Errorf("AuthorityKeyId = %x, want the CA's %x", cert.AuthorityKeyId, ca.Cert.SubjectKeyId)
			}
			if n := cert.SerialNumber; n.Sign() <= 0 || n.BitLen() > 128 {
				t.Errorf("serial %s, want positive and 128 bits at most", n)
			}
			verify(t, cert, []*x509.Certificate{ca.Cert}, f.clock.Now())
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: managerapi.ServerName(node2), CurrentTime: f.clock.Now()}); err == nil {
				t.Errorf("the certificate verifies for %q", managerapi.ServerName(node2))
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.1", CurrentTime: f.clock.Now()}); err == nil {
				t.Error("the certificate verifies for a pod IP")
			}
		})
	}
}

// verify checks that cert verifies as node1's manager against roots at
// now.
func verify(t *testing.T, cert *x509.Certificate, roots []*x509.Certificate, now time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	if _, err := cert.Verify(x509.VerifyOptions{
		Roots: pool, DNSName: managerapi.ServerName(node1), CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		t.Errorf("Verify() = %v", err)
	}
}

func TestSignerLeavesAlone(t *testing.T) {
	tests := []struct {
		name string
		csr  func(c *certv1.CertificateSigningRequest)
	}{
		{name: "not approved", csr: func(*certv1.CertificateSigningRequest) {}},
		{name: "denied", csr: func(c *certv1.CertificateSigningRequest) {
			c.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateDenied, Status: v1.ConditionTrue}}
		}},
		{name: "already signed", csr: func(c *certv1.CertificateSigningRequest) { approved(c).Status.Certificate = []byte("x") }},
		{name: "failed", csr: func(c *certv1.CertificateSigningRequest) {
			approved(c).Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{Type: certv1.CertificateFailed, Status: v1.ConditionTrue})
		}},
		{name: "another signer", csr: func(c *certv1.CertificateSigningRequest) { approved(c).Spec.SignerName = "example.com/other" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := newCSR("csr-1", managerRequest(t, node1).pem(t))
			tc.csr(csr)
			f := newFixture(t, csr)
			f.withCA()
			if err := f.c.Signer.Sync(f.ctx, csr.Name); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			if w := hostpathtest.DescribeWrites(f.kube.Actions()); len(w) != 0 {
				t.Errorf("writes = %q, want none", w)
			}
		})
	}
}

func TestSignerFails(t *testing.T) {
	tests := []struct {
		name            string
		request         func(t *testing.T) []byte
		age             time.Duration
		reason, message string
	}{
		{name: "approved by hand with an IP SAN", request: func(t *testing.T) []byte {
			r := managerRequest(t, node1)
			r.ips = []net.IP{net.ParseIP("10.0.0.1")}
			return r.pem(t)
		}, reason: ReasonBadRequest, message: "IP addresses"},
		{name: "approved by hand with a SAN of another node", request: func(t *testing.T) []byte {
			r := managerRequest(t, node1)
			r.dns = []string{managerapi.ServerName(node2)}
			return r.pem(t)
		}, reason: ReasonWrongNode},
		{name: "approved by hand with another common name", request: func(t *testing.T) []byte {
			r := managerRequest(t, node1)
			r.cn = "admin"
			return r.pem(t)
		}, reason: ReasonBadRequest, message: "common name"},
		{name: "unparsable", request: func(*testing.T) []byte { return []byte("x") }, reason: ReasonBadRequest},
		{name: "the CA expired", request: func(t *testing.T) []byte { return managerRequest(t, node1).pem(t) }, age: CAValidity + time.Hour,
			reason: ReasonSignFailed, message: "expired"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := approved(newCSR("csr-1", tc.request(t)))
			f := newFixture(t, csr)
			f.withCA()
			f.clock.Step(tc.age)
			if err := f.c.Signer.Sync(f.ctx, csr.Name); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			got := f.getCSR(csr.Name)
			c := condition(got, certv1.CertificateFailed)
			if c == nil || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) || len(got.Status.Certificate) > 0 {
				t.Errorf("Failed condition = %+v, certificate %d bytes; want reason %q with %q", c, len(got.Status.Certificate), tc.reason, tc.message)
			}
		})
	}
}

// Without the CA Secret the Signer waits (the Secret's event queues the
// CSR again); it signs once the Authority made the CA. A broken CA is an
// error, retried.
func TestSignerWaitsForTheCA(t *testing.T) {
	csr := approved(newCSR("csr-1", managerRequest(t, node1).pem(t)))
	f := newFixture(t, csr)
	if err := f.c.Signer.Sync(f.ctx, csr.Name); err != nil {
		t.Fatalf("Sync() = %v, want nil", err)
	}
	if w := hostpathtest.DescribeWrites(f.kube.Actions()); len(w) != 0 {
		t.Errorf("writes = %q, want none", w)
	}
	ca := f.withCA()
	verify(t, f.sign(csr.Name), []*x509.Certificate{ca.Cert}, f.clock.Now())
}

func TestSignerBrokenCA(t *testing.T) {
	csr := approved(newCSR("csr-1", managerRequest(t, node1).pem(t)))
	f := newFixture(t, csr)
	f.withCA()
	s := f.getSecret()
	s.Data[v1.TLSCertKey] = []byte("junk")
	if _, err := f.kube.CoreV1().Secrets(testNamespace).Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.kube.ClearActions()
	if err := f.c.Signer.Sync(f.ctx, csr.Name); err == nil || !strings.Contains(err.Error(), "the Secret hostpath-system/hostpath-manager-ca") {
		t.Fatalf("Sync() = %v, want an error about the Secret", err)
	}
	if w := hostpathtest.DescribeWrites(f.kube.Actions()); len(w) != 0 {
		t.Errorf("writes = %q, want none", w)
	}
}
