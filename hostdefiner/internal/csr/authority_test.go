package csr

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
)

// syncCA runs the Authority's sync, refreshes the indexers and returns
// when it asks to come back.
func (f *fixture) syncCA() time.Duration {
	f.t.Helper()
	next, err := f.c.Authority.sync(f.ctx)
	if err != nil {
		f.t.Fatalf("sync() = %v", err)
	}
	f.refresh()
	return next
}

// secretCA parses the signing CA of the fixture's Secret.
func (f *fixture) secretCA() *CA {
	f.t.Helper()
	s := f.getSecret()
	ca, err := ParseCA(s.Data[v1.TLSCertKey], s.Data[v1.TLSPrivateKeyKey])
	if err != nil {
		f.t.Fatal(err)
	}
	return ca
}

// wantBundle checks that the bundle holds exactly want, in order.
func (f *fixture) wantBundle(want ...*x509.Certificate) {
	f.t.Helper()
	got := f.bundle()
	if !slices.EqualFunc(got, want, func(a, b *x509.Certificate) bool { return a.Equal(b) }) {
		var names []string
		for _, c := range got {
			names = append(names, c.Subject.CommonName)
		}
		f.t.Errorf("bundle = %q, want %d certificates", names, len(want))
	}
}

func TestAuthorityCreatesTheCAOnce(t *testing.T) {
	f := newFixture(t)
	if next := f.syncCA(); next != 0 {
		t.Errorf("sync() asks to come back in %s, want never", next)
	}
	if w := hostpathtest.DescribeWrites(f.kube.Actions()); !slices.Equal(w, []string{"create secrets " + managerapi.CASecret, "create configmaps " + managerapi.CABundleConfigMap}) {
		t.Errorf("writes = %q, want the Secret and the ConfigMap created", w)
	}
	s := f.getSecret()
	if s.Type != v1.SecretTypeTLS || len(s.Data) != 2 || len(s.Annotations) != 0 {
		t.Errorf("Secret: type %q, %d keys, annotations %v; want kubernetes.io/tls with tls.crt and tls.key", s.Type, len(s.Data), s.Annotations)
	}
	ca := f.secretCA()
	c := ca.Cert
	key, ok := ca.Key.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Errorf("CA key %T, want ECDSA P-256", ca.Key)
	}
	if !c.IsCA || c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign|x509.KeyUsageDigitalSignature || c.Subject.String() != c.Issuer.String() ||
		c.Subject.CommonName != "hostpath-manager-ca@1748779200" || !c.NotAfter.Equal(t0.Add(CAValidity)) || c.CheckSignatureFrom(c) != nil {
		t.Errorf("CA %s: IsCA %v, KeyUsage %b, NotAfter %s; want a self-signed CA of 10 years", c.Subject, c.IsCA, c.KeyUsage, c.NotAfter)
	}
	f.wantBundle(c)

	// Synced again, and by a new leader: the same CA, nothing written.
	f.kube.ClearActions()
	f.syncCA()
	f2 := newFixture(t, f.getSecret(), bundleConfigMap(f))
	f2.syncCA()
	for _, x := range []*fixture{f, f2} {
		if w := hostpathtest.DescribeWrites(x.kube.Actions()); len(w) != 0 {
			t.Errorf("writes = %q, want none", w)
		}
		if !x.secretCA().Cert.Equal(c) || !x.secretCA().Key.(*ecdsa.PrivateKey).Equal(key) {
			t.Error("the CA changed")
		}
	}
	// The second leader signs with the first CA.
	csr := approved(newCSR("csr-1", managerRequest(t, node1).pem(t)))
	if _, err := f2.kube.CertificatesV1().CertificateSigningRequests().Create(f2.ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f2.refresh()
	verify(t, f2.sign(csr.Name), []*x509.Certificate{c}, f2.clock.Now())
}

// bundleConfigMap returns the bundle ConfigMap of f.
func bundleConfigMap(f *fixture) *v1.ConfigMap {
	cm, err := f.kube.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, managerapi.CABundleConfigMap, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return cm
}

func TestAuthorityRepairsTheBundle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(f *fixture)
		want   string
	}{
		{name: "edited", damage: func(f *fixture) {
			cm := bundleConfigMap(f)
			cm.Data[managerapi.CABundleKey] = "junk"
			if _, err := f.kube.CoreV1().ConfigMaps(testNamespace).Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: "update configmaps " + managerapi.CABundleConfigMap},
		{name: "deleted", damage: func(f *fixture) {
			if err := f.kube.CoreV1().ConfigMaps(testNamespace).Delete(f.ctx, managerapi.CABundleConfigMap, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: "create configmaps " + managerapi.CABundleConfigMap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.syncCA()
			tc.damage(f)
			f.refresh()
			f.kube.ClearActions()
			f.syncCA()
			if w := hostpathtest.DescribeWrites(f.kube.Actions()); !slices.Equal(w, []string{tc.want}) {
				t.Errorf("writes = %q, want [%q]", w, tc.want)
			}
			f.wantBundle(f.secretCA().Cert)
		})
	}
}

// rotate sets the RotateAnnotation of the fixture's Secret to value.
func (f *fixture) rotate(value string) {
	f.t.Helper()
	s := f.getSecret()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[RotateAnnotation] = value
	if _, err := f.kube.CoreV1().Secrets(testNamespace).Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.refresh()
}

func TestAuthorityRotation(t *testing.T) {
	overlap := testConfig().CAOverlap
	csr := approved(newCSR("csr-old", managerRequest(t, node1).pem(t)))
	f := newFixture(t, csr)
	f.syncCA()
	old := f.secretCA().Cert
	oldLeaf := f.sign(csr.Name)

	f.clock.Step(time.Hour)
	f.rotate("1")
	if next := f.syncCA(); next != overlap {
		t.Errorf("sync() asks to come back in %s, want the overlap, %s", next, overlap)
	}
	s := f.getSecret()
	current := f.secretCA().Cert
	if current.Equal(old) {
		t.Fatal("the CA did not change")
	}
	until := t0.Add(time.Hour + overlap).Format(time.RFC3339)
	if s.Annotations[RotatedAnnotation] != "1" || s.Annotations[PreviousUntilAnnotation] != until {
		t.Errorf("annotations = %v, want %s=1 and %s=%s", s.Annotations, RotatedAnnotation, PreviousUntilAnnotation, until)
	}
	if prev, err := parseCerts(s.Data[PreviousCertKey]); err != nil || len(prev) != 1 || !prev[0].Equal(old) {
		t.Errorf("%s = %d certificates (%v), want the old CA", PreviousCertKey, len(prev), err)
	}
	f.wantBundle(current, old)

	// The new CA signs; the bundle trusts both leaves.
	csr2 := approved(newCSR("csr-new", managerRequest(t, node1).pem(t)))
	if _, err := f.kube.CertificatesV1().CertificateSigningRequests().Create(f.ctx, csr2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	newLeaf := f.sign(csr2.Name)
	if newLeaf.CheckSignatureFrom(current) != nil {
		t.Errorf("the new leaf is not signed by the new CA")
	}
	verify(t, newLeaf, f.bundle(), f.clock.Now())
	verify(t, oldLeaf, f.bundle(), f.clock.Now())

	// The same annotation again: no new rotation.
	f.kube.ClearActions()
	if next := f.syncCA(); next != overlap {
		t.Errorf("sync() asks to come back in %s, want %s", next, overlap)
	}
	if w := hostpathtest.DescribeWrites(f.kube.Actions()); len(w) != 0 {
		t.Errorf("writes = %q, want none", w)
	}

	// Just before the overlap ends, both; then only the new.
	f.clock.Step(overlap - time.Second)
	if next := f.syncCA(); next != time.Second {
		t.Errorf("sync() asks to come back in %s, want 1s", next)
	}
	f.wantBundle(current, old)
	f.clock.Step(time.Second)
	if next := f.syncCA(); next != 0 {
		t.Errorf("sync() asks to come back in %s, want never", next)
	}
	f.wantBundle(current)
	s = f.getSecret()
	if _, ok := s.Data[PreviousCertKey]; ok || s.Annotations[PreviousUntilAnnotation] != "" || s.Annotations[RotatedAnnotation] != "1" {
		t.Errorf("Secret keeps %s or its annotation: annotations %v", PreviousCertKey, s.Annotations)
	}
	if !f.secretCA().Cert.Equal(current) {
		t.Error("the current CA changed when the overlap ended")
	}
}

// A rotation during an overlap keeps both old CAs until the new overlap
// ends.
func TestAuthorityRotationDuringAnOverlap(t *testing.T) {
	overlap := testConfig().CAOverlap
	f := newFixture(t)
	f.syncCA()
	first := f.secretCA().Cert
	f.rotate("1")
	f.syncCA()
	second := f.secretCA().Cert
	f.clock.Step(overlap / 2)
	f.rotate("2")
	if next := f.syncCA(); next != overlap {
		t.Errorf("sync() asks to come back in %s, want %s", next, overlap)
	}
	third := f.secretCA().Cert
	f.wantBundle(third, second, first)
	f.clock.Step(overlap)
	f.syncCA()
	f.wantBundle(third)
}

func TestAuthorityBrokenSecret(t *testing.T) {
	f := newFixture(t)
	f.syncCA()
	s := f.getSecret()
	s.Data[v1.TLSPrivateKeyKey] = []byte("junk")
	if _, err := f.kube.CoreV1().Secrets(testNamespace).Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.kube.ClearActions()
	if _, err := f.c.Authority.sync(f.ctx); err == nil || !strings.Contains(err.Error(), "delete it for a new CA") {
		t.Errorf("sync() = %v, want an error about the Secret", err)
	}
	if w := hostpathtest.DescribeWrites(f.kube.Actions()); len(w) != 0 {
		t.Errorf("writes = %q, want none", w)
	}
}

// Previous CAs without their annotation are no longer trusted.
func TestAuthorityPreviousWithoutUntil(t *testing.T) {
	f := newFixture(t)
	f.syncCA()
	f.rotate("1")
	f.syncCA()
	s := f.getSecret()
	delete(s.Annotations, PreviousUntilAnnotation)
	if _, err := f.kube.CoreV1().Secrets(testNamespace).Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.syncCA()
	f.wantBundle(f.secretCA().Cert)
	if _, ok := f.getSecret().Data[PreviousCertKey]; ok {
		t.Errorf("%s kept", PreviousCertKey)
	}
}
