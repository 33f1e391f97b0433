package certs

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"hostpath.dev/api/managerapi/trust"
	"hostpath.dev/manager/internal/certs/certstest"
)

// trustEnv is an env whose signer signs with a second CA, with a stored
// certificate of a first CA (valid for a day, an hour of it gone: not due
// for renewal) and a CA bundle as the Manager's Roots, empty until the
// test sets it.
type trustEnv struct {
	*env
	ca1, ca2 *certstest.CA
	bundle   *trust.Bundle
}

func newTrustEnv(t *testing.T) *trustEnv {
	t.Helper()
	e := newEnv(t)
	ca1 := e.signer.CA
	ca2, err := certstest.NewCA("second test CA")
	if err != nil {
		t.Fatal(err)
	}
	e.signer = certstest.NewSigner(ca2, e.clock)
	data, err := ca1.ServingPEM(node, e.clock.Now().Add(-time.Hour), DefaultLifetime)
	if err != nil {
		t.Fatal(err)
	}
	e.store(t, data)
	te := &trustEnv{env: e, ca1: ca1, ca2: ca2, bundle: trust.NewBundle()}
	te.roots = te.bundle
	return te
}

// setBundle sets the bundle to the CAs'.
func (e *trustEnv) setBundle(t *testing.T, cas ...*certstest.CA) {
	t.Helper()
	var data []byte
	for _, ca := range cas {
		data = append(data, ca.PEM...)
	}
	if err := e.bundle.Set(data); err != nil {
		t.Fatal(err)
	}
}

// idle waits until the Manager waits on the clock again, and fails if it
// makes an attempt meanwhile.
func (s *started) idle(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !e.clock.HasWaiters() {
		select {
		case err := <-s.attempts:
			t.Fatalf("an attempt to get a certificate (%v), want none", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the Manager does not wait on the clock")
		}
		runtime.Gosched()
	}
}

// issuedBy fails unless s serves a certificate of ca, and the stored one.
func (s *started) issuedBy(t *testing.T, e *env, ca *certstest.CA) {
	t.Helper()
	cur := s.Current()
	if cur == nil {
		t.Fatal("no certificate served")
	}
	if err := cur.Leaf.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("the certificate served (issuer %q) is not from %q: %v", cur.Leaf.Issuer.CommonName, ca.Cert.Subject.CommonName, err)
	}
	if !bytes.Equal(e.stored(t), cur.Leaf.Raw) {
		t.Error("the certificate served is not the one stored")
	}
}

// TestUntrustedAtStart: a stored certificate of a CA that the bundle no
// longer holds (a reinstall) is served until its successor is signed,
// which is at once: one CSR at start, then the new CA's certificate.
func TestUntrustedAtStart(t *testing.T) {
	e := newTrustEnv(t)
	e.setBundle(t, e.ca2)
	e.signer.SetMode(certstest.Hold)
	m := e.start(t)
	name := e.watched(t, "no CSR for the untrusted certificate")
	if old := m.Current(); old == nil || old.Leaf.CheckSignatureFrom(e.ca1.Cert) != nil {
		t.Fatal("the stored certificate is not served while the renewal is pending")
	}
	if err := e.signer.Approve(name); err != nil {
		t.Fatal(err)
	}
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	m.issuedBy(t, e.env, e.ca2)
	if err := m.verify(m.Current(), e.bundle.Pool()); err != nil {
		t.Errorf("the new certificate does not verify against the bundle: %v", err)
	}
	// Trusted now: no other CSR, neither at the next look nor at a new
	// bundle of the same CA.
	e.waitForTimer(t)
	e.clock.Step(TrustCheckInterval)
	m.idle(t, e.env)
	e.setBundle(t, e.ca2)
	e.clock.Step(TrustCheckInterval)
	m.idle(t, e.env)
	if n := e.signer.Created(); n != 1 {
		t.Errorf("%d CSRs, want 1", n)
	}
}

// TestTrustedDuringRotation: while the bundle holds both CAs the stored
// certificate is kept; once the old CA leaves the bundle it is renewed at
// the next look, not at 70% of its life.
func TestTrustedDuringRotation(t *testing.T) {
	e := newTrustEnv(t)
	e.setBundle(t, e.ca1, e.ca2)
	m := e.start(t)
	<-m.Obtained()
	stored := m.Current()
	m.idle(t, e.env)
	e.clock.Step(TrustCheckInterval)
	m.idle(t, e.env)
	if n := e.signer.Created(); n != 0 || m.Current() != stored {
		t.Fatalf("bundle of both CAs: %d CSRs, certificate changed %v", n, m.Current() != stored)
	}
	e.setBundle(t, e.ca2)
	e.clock.Step(TrustCheckInterval - time.Millisecond)
	m.idle(t, e.env)
	e.clock.Step(time.Millisecond)
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	m.issuedBy(t, e.env, e.ca2)
}

// TestUnknownBundle: without a bundle (none published, or not readable
// yet) the stored certificate is kept; CheckTrust makes the Manager look
// at a bundle at once, without waiting for the next TrustCheckInterval.
func TestUnknownBundle(t *testing.T) {
	e := newTrustEnv(t)
	m := e.start(t)
	<-m.Obtained()
	for range 3 {
		m.idle(t, e.env)
		e.clock.Step(TrustCheckInterval)
	}
	m.idle(t, e.env)
	if n := e.signer.Created(); n != 0 {
		t.Fatalf("%d CSRs with an empty bundle", n)
	}
	if err := e.bundle.Set([]byte("no certificate")); err == nil {
		t.Fatal("the bundle took data without a certificate")
	}
	m.CheckTrust()
	m.idle(t, e.env)
	e.setBundle(t, e.ca2)
	m.CheckTrust()
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	m.issuedBy(t, e.env, e.ca2)
}

// TestUntrustedRenewalRetried: a renewal for trust that fails keeps the
// untrusted certificate in service and is retried with backoff, though
// the certificate is not due for renewal by its age.
func TestUntrustedRenewalRetried(t *testing.T) {
	e := newTrustEnv(t)
	e.setBundle(t, e.ca2)
	e.signer.SetMode(certstest.Deny)
	m := e.start(t)
	<-m.Obtained()
	stored := m.Current()
	if err := m.attempt(t); err == nil {
		t.Fatal("a denied CSR succeeded")
	}
	if m.Current() != stored {
		t.Fatal("the stored certificate is no longer served after a failed renewal")
	}
	e.signer.SetMode(certstest.Sign)
	e.waitForTimer(t)
	e.clock.Step(InitialBackoff)
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	m.issuedBy(t, e.env, e.ca2)
}

// TestWithoutRoots: a Manager without Roots does not wake up for them.
func TestWithoutRoots(t *testing.T) {
	e := newEnv(t)
	m := e.start(t)
	if err := m.attempt(t); err != nil {
		t.Fatal(err)
	}
	e.waitForTimer(t)
	e.clock.Step(TrustCheckInterval)
	if !e.clock.HasWaiters() {
		t.Error("the Manager woke up before its renewal time")
	}
}
