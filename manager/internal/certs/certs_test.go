package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/certs/certstest"
)

const node = "node-a"

// env is a Manager's world: a CA signing CSRs through a fake clientset, a
// fake clock and a certificate directory.
type env struct {
	clock  *testingclock.FakeClock
	signer *certstest.Signer
	dir    string
	// roots, when set, is the Manager's Config.Roots.
	roots Roots
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ca, err := certstest.NewCA("hostpath test CA")
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Now().Truncate(time.Second))
	return &env{clock: clk, signer: certstest.NewSigner(ca, clk), dir: filepath.Join(t.TempDir(), "state", "tls")}
}

// started is a started Manager and the results of its attempts.
type started struct {
	*Manager
	attempts chan error
	stop     func()
}

// start starts a Manager on the env; it stops when the test ends (or at
// stop).
func (e *env) start(t *testing.T) *started {
	t.Helper()
	m, err := New(Config{NodeName: node, Dir: e.dir, Client: e.signer.CSRs(), Clock: e.clock, Roots: e.roots})
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan error)
	m.attempted = attempts
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	if err := m.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	stop := func() { cancel(); <-m.Done() }
	t.Cleanup(stop)
	return &started{Manager: m, attempts: attempts, stop: stop}
}

// attempt waits for the Manager's next attempt and returns its result.
func (s *started) attempt(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.attempts:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("no attempt to get a certificate within 30s")
		return nil
	}
}

// waitForTimer waits until the Manager waits on the fake clock, so that a
// Step counts from its timer.
func (e *env) waitForTimer(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !e.clock.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the Manager does not wait on the clock")
		}
		runtime.Gosched()
	}
}

// watched returns the name of the CSR the Manager watches (with the
// signer holding it), failing at once with failure if none is within 30 s.
func (e *env) watched(t *testing.T, failure string) string {
	t.Helper()
	select {
	case name := <-e.signer.Watching():
		return name
	case <-time.After(30 * time.Second):
		t.Fatal(failure)
		return ""
	}
}

// store stores data as the certificate file, as the manager does (the
// directory 0700, the file 0600).
func (e *env) store(t *testing.T, data []byte) {
	t.Helper()
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// stored returns the stored file's certificate (DER) and checks the modes.
func (e *env) stored(t *testing.T) []byte {
	t.Helper()
	for path, want := range map[string]os.FileMode{e.dir: 0o700 | os.ModeDir, filepath.Join(e.dir, FileName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %s, want %s", path, fi.Mode(), want)
		}
	}
	data, err := os.ReadFile(filepath.Join(e.dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("stored file does not start with a certificate")
	}
	return block.Bytes
}

// TestFirstStart: without a stored certificate the Manager asks for one
// with the CSR the host definer expects, stores it (0600 in a 0700
// directory) and serves it.
func TestFirstStart(t *testing.T) {
	e := newEnv(t)
	m := e.start(t)
	if m.Ready() {
		t.Error("Ready before any certificate")
	}
	if _, err := m.GetCertificate(nil); err == nil {
		t.Error("GetCertificate without a certificate succeeded")
	}
	select {
	case <-m.Obtained():
		t.Fatal("Obtained before any certificate")
	default:
	}
	if err := m.attempt(t); err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	<-m.Obtained()
	cur := m.Current()
	if !m.Ready() || cur == nil {
		t.Fatal("not Ready after a signed CSR")
	}
	if got, _ := m.GetCertificate(nil); got != cur {
		t.Error("GetCertificate does not serve the current certificate")
	}
	if !bytes.Equal(e.stored(t), cur.Leaf.Raw) {
		t.Error("the stored certificate is not the one served")
	}
	checkRequest(t, e)
	st := m.Status()
	nb := e.clock.Now()
	if !st.NotBefore.Equal(nb) || !st.NotAfter.Equal(nb.Add(DefaultLifetime)) || !st.RenewAfter.Equal(nb.Add(DefaultLifetime*7/10)) ||
		st.Issuer != "hostpath test CA" || st.RenewalError != "" || st.RenewalErrorTime != nil {
		t.Errorf("Status = %+v", st)
	}
}

// checkRequest checks the one CSR made: the shape the approver expects.
func checkRequest(t *testing.T, e *env) {
	t.Helper()
	reqs, err := e.signer.Requests(context.Background())
	if err != nil || len(reqs) != 1 {
		t.Fatalf("CSRs = %d, %v; want 1", len(reqs), err)
	}
	spec := reqs[0].Spec
	if spec.SignerName != managerapi.SignerName || spec.ExpirationSeconds == nil || *spec.ExpirationSeconds != 86400 ||
		!slices.Equal(spec.Usages, []certificatesv1.KeyUsage{"digital signature", "server auth"}) {
		t.Errorf("CSR spec = signer %q, expirationSeconds %v, usages %v", spec.SignerName, spec.ExpirationSeconds, spec.Usages)
	}
	block, _ := pem.Decode(spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if req.Subject.CommonName != "system:hostpath-manager:node-a" || !slices.Equal(req.Subject.Organization, []string{"hostpath.dev:managers"}) ||
		!slices.Equal(req.DNSNames, []string{"node-a.manager.hostpath.dev"}) || len(req.IPAddresses)+len(req.URIs)+len(req.EmailAddresses) != 0 ||
		req.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CSR = subject %v, DNS %v, IP %v, URI %v, email %v, key %v", req.Subject, req.DNSNames, req.IPAddresses, req.URIs, req.EmailAddresses, req.PublicKeyAlgorithm)
	}
}

// TestRestartReusesCertificate: a restarted Manager serves the stored
// certificate at once and makes no CSR.
func TestRestartReusesCertificate(t *testing.T) {
	e := newEnv(t)
	first := e.start(t)
	if err := first.attempt(t); err != nil {
		t.Fatal(err)
	}
	served := first.Current()
	first.stop()

	again := e.start(t)
	<-again.Obtained() // at Start
	cur := again.Current()
	if cur == nil || !bytes.Equal(cur.Leaf.Raw, served.Leaf.Raw) {
		t.Fatal("the restarted Manager does not serve the stored certificate")
	}
	e.waitForTimer(t) // the loop waits for the renewal time
	if n := e.signer.Created(); n != 1 {
		t.Errorf("%d CSRs, want the first one only", n)
	}
}

// TestUnusableStoredCertificate: a stored certificate that is expired, not
// yet valid, for another name, or unreadable is replaced through a CSR.
func TestUnusableStoredCertificate(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		from     time.Duration // NotBefore, from now
		lifetime time.Duration
		dnsNames []string
		garbage  bool
	}{
		{desc: "expired", from: -2 * time.Hour, lifetime: time.Hour},
		{desc: "not yet valid", from: time.Hour, lifetime: time.Hour},
		{desc: "another node's", from: -time.Minute, lifetime: time.Hour, dnsNames: []string{"node-b.manager.hostpath.dev"}},
		{desc: "an extra name", from: -time.Minute, lifetime: time.Hour, dnsNames: []string{"node-a.manager.hostpath.dev", "evil.example"}},
		{desc: "not PEM", garbage: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t)
			data := []byte("not a certificate\n")
			if !tc.garbage {
				var err error
				if data, err = e.signer.CA.ServingPEM(node, e.clock.Now().Add(tc.from), tc.lifetime, tc.dnsNames...); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(e.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.dir, FileName), data, 0o644); err != nil {
				t.Fatal(err)
			}
			m := e.start(t)
			if m.Ready() {
				t.Error("Ready with an unusable stored certificate")
			}
			if err := m.attempt(t); err != nil {
				t.Fatal(err)
			}
			if !m.Ready() || e.signer.Created() != 1 {
				t.Fatalf("Ready %v after %d CSRs", m.Ready(), e.signer.Created())
			}
			if !bytes.Equal(e.stored(t), m.Current().Leaf.Raw) {
				t.Error("the stored certificate was not replaced")
			}
		})
	}
}

// TestStoredPastRenewalTime: a stored certificate past 70% of its life is
// served at once and renewed at once.
func TestStoredPastRenewalTime(t *testing.T) {
	e := newEnv(t)
	data, err := e.signer.CA.ServingPEM(node, e.clock.Now().Add(-45*time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.store(t, data)
	m := e.start(t)
	stored := m.Current()
	if stored == nil {
		t.Fatal("the stored certificate, valid for 15 more minutes, is not served")
	}
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	if cur := m.Current(); cur == stored || e.signer.Created() != 1 {
		t.Errorf("not renewed at once: %d CSRs", e.signer.Created())
	}
}

// TestRenewsAt70Percent: no CSR before 70% of the certificate's life; at
// 70% a new one, and the new certificate is served and stored.
func TestRenewsAt70Percent(t *testing.T) {
	e := newEnv(t)
	m := e.start(t)
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	first := m.Current()
	e.waitForTimer(t)
	e.clock.Step(DefaultLifetime*7/10 - time.Second)
	if n := e.signer.Created(); n != 1 || m.Current() != first {
		t.Fatalf("before 70%%: %d CSRs, certificate changed %v", n, m.Current() != first)
	}
	e.clock.Step(time.Second)
	if err := m.attempt(t); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	cur := m.Current()
	if n := e.signer.Created(); n != 2 || cur == first || cur.Leaf.Equal(first.Leaf) {
		t.Fatalf("after 70%%: %d CSRs, certificate changed %v", n, cur != first)
	}
	if got, _ := m.GetCertificate(nil); got != cur {
		t.Error("GetCertificate serves the old certificate")
	}
	if !bytes.Equal(e.stored(t), cur.Leaf.Raw) {
		t.Error("the renewed certificate was not stored")
	}
	if !m.Status().RenewAfter.Equal(e.clock.Now().Add(DefaultLifetime * 7 / 10)) {
		t.Errorf("RenewAfter = %v after renewal at %v", m.Status().RenewAfter, e.clock.Now())
	}
}

// TestFailedRenewal: a denied renewal keeps the current certificate,
// reports the error, and is retried after 10s, then 20s; a success clears
// the error. A certificate that expires while renewals fail is no longer
// served.
func TestFailedRenewal(t *testing.T) {
	e := newEnv(t)
	m := e.start(t)
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	first := m.Current()
	e.signer.SetMode(certstest.Deny)
	e.waitForTimer(t)
	e.clock.Step(DefaultLifetime * 7 / 10)
	if err := m.attempt(t); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("renewal while denied: %v", err)
	}
	st := m.Status()
	if m.Current() != first || !strings.Contains(st.RenewalError, "denied") || st.RenewalErrorTime == nil || !st.RenewalErrorTime.Equal(e.clock.Now()) {
		t.Fatalf("after a denied renewal: certificate kept %v, Status %+v", m.Current() == first, st)
	}
	for i, backoff := range []time.Duration{InitialBackoff, 2 * InitialBackoff} {
		e.waitForTimer(t)
		e.clock.Step(backoff - time.Millisecond)
		if n := e.signer.Created(); n != 2+i {
			t.Fatalf("retry %d before its backoff: %d CSRs", i, n)
		}
		if i == 1 {
			e.signer.SetMode(certstest.Sign)
		}
		e.clock.Step(time.Millisecond)
		err := m.attempt(t)
		if (err == nil) != (i == 1) {
			t.Fatalf("retry %d: %v", i, err)
		}
	}
	if cur := m.Current(); cur == first || m.Status().RenewalError != "" {
		t.Errorf("after a successful retry: certificate changed %v, Status %+v", cur != first, m.Status())
	}
}

// TestExpiresWhileRenewalsFail: once the certificate has expired it is no
// longer served, though Status still describes it.
func TestExpiresWhileRenewalsFail(t *testing.T) {
	e := newEnv(t)
	m := e.start(t)
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	e.signer.SetMode(certstest.Deny)
	e.waitForTimer(t)
	e.clock.Step(DefaultLifetime * 7 / 10)
	if err := m.attempt(t); err == nil {
		t.Fatal("renewal while denied succeeded")
	}
	e.waitForTimer(t)
	e.clock.Step(DefaultLifetime)
	if err := m.attempt(t); err == nil {
		t.Fatal("retry while denied succeeded")
	}
	if m.Ready() || m.Current() != nil {
		t.Error("an expired certificate is still served")
	}
	if st := m.Status(); st.NotAfter == nil || st.RenewalError == "" {
		t.Errorf("Status = %+v", st)
	}
}

// TestFirstRequestRetried: a manager whose first CSR is denied serves
// nothing, says why, and gets a certificate on a later attempt.
func TestFirstRequestRetried(t *testing.T) {
	e := newEnv(t)
	e.signer.SetMode(certstest.Deny)
	m := e.start(t)
	if err := m.attempt(t); err == nil {
		t.Fatal("denied CSR succeeded")
	}
	if st := m.Status(); m.Ready() || st.NotAfter != nil || st.RenewalError == "" {
		t.Fatalf("Ready %v, Status %+v", m.Ready(), st)
	}
	e.signer.SetMode(certstest.Sign)
	e.waitForTimer(t)
	e.clock.Step(InitialBackoff)
	if err := m.attempt(t); err != nil || !m.Ready() {
		t.Fatalf("retry: %v, Ready %v", err, m.Ready())
	}
}

// TestWaitsForApproval: a held CSR is waited for; its approval is served.
func TestWaitsForApproval(t *testing.T) {
	e := newEnv(t)
	e.signer.SetMode(certstest.Hold)
	m := e.start(t)
	name := e.watched(t, "the Manager does not watch its CSR")
	if m.Ready() {
		t.Fatal("Ready before approval")
	}
	if err := e.signer.Approve(name); err != nil {
		t.Fatal(err)
	}
	if err := m.attempt(t); err != nil || !m.Ready() {
		t.Fatalf("after approval: %v, Ready %v", err, m.Ready())
	}
}

func TestNew(t *testing.T) {
	e := newEnv(t)
	csrs := e.signer.CSRs()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Dir: e.dir, Client: csrs}, "node name"},
		{Config{NodeName: node, Client: csrs}, "directory"},
		{Config{NodeName: node, Dir: e.dir}, "API client"},
		{Config{NodeName: node, Dir: e.dir, Client: csrs, Lifetime: 9 * time.Minute}, "shorter than 10m0s"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error about %q", tc.cfg, err, tc.want)
		}
	}
}
