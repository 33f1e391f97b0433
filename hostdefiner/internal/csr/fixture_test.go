package csr

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
)

const (
	testNamespace = "hostpath-system"
	testSA        = "hostpath-manager"
	testUsername  = "system:serviceaccount:hostpath-system:hostpath-manager"
	node1         = "node-1"
	node2         = "node-2"
	pod1          = "hostpath-manager-abcde"
	uid1          = "0b9c3e0e-1111-4c1e-9d4e-000000000001"
)

var (
	// t0 is the fake clock's start.
	t0               = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	managerPodLabels = hostpathtest.ManagerPodLabels
	serving          = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageServerAuth}
)

// testConfig is the controllers' configuration in the tests.
func testConfig() Config {
	return Config{
		Namespace: testNamespace, ServiceAccount: testSA,
		ManagerSelector: labels.SelectorFromSet(managerPodLabels),
		MaxLifetime:     24 * time.Hour, CAOverlap: 48 * time.Hour,
	}
}

// fixture holds a test's controllers in the style of sample-controller:
// objects go into the informer indexers (the informers are never started)
// and into the fake clientset; refresh copies what the controllers wrote
// back into the indexers, as the informers would.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	kube  *k8sfake.Clientset
	inf   Informers
	clock *clocktesting.FakeClock
	c     *Controllers
}

// newFixture returns a fixture holding objs.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	kube := k8sfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	f := &fixture{
		t: t, ctx: ctx, kube: kube, clock: clocktesting.NewFakeClock(t0),
		inf: Informers{
			CSRs:       factory.Certificates().V1().CertificateSigningRequests().Informer(),
			Pods:       factory.Core().V1().Pods().Informer(),
			Secrets:    factory.Core().V1().Secrets().Informer(),
			ConfigMaps: factory.Core().V1().ConfigMaps().Informer(),
		},
	}
	c, err := New(testConfig(), kube, f.inf, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	f.refresh()
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			if err := f.inf.Pods.GetIndexer().Add(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	kube.ClearActions()
	return f
}

// refresh replaces the CSRs, Secrets and ConfigMaps of the indexers with
// those of the fake clientset.
func (f *fixture) refresh() {
	f.t.Helper()
	csrs, err := f.kube.CertificatesV1().CertificateSigningRequests().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	secrets, err := f.kube.CoreV1().Secrets(testNamespace).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	cms, err := f.kube.CoreV1().ConfigMaps(testNamespace).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	hostpathtest.Replace(f.t, f.inf.CSRs.GetIndexer(), csrs)
	hostpathtest.Replace(f.t, f.inf.Secrets.GetIndexer(), secrets)
	hostpathtest.Replace(f.t, f.inf.ConfigMaps.GetIndexer(), cms)
}

// getCSR returns the CSR name from the fake clientset.
func (f *fixture) getCSR(name string) *certv1.CertificateSigningRequest {
	f.t.Helper()
	csr, err := f.kube.CertificatesV1().CertificateSigningRequests().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return csr
}

// getSecret returns the CA Secret from the fake clientset.
func (f *fixture) getSecret() *v1.Secret {
	f.t.Helper()
	s, err := f.kube.CoreV1().Secrets(testNamespace).Get(f.ctx, managerapi.CASecret, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// bundle returns the certificates of the bundle ConfigMap.
func (f *fixture) bundle() []*x509.Certificate {
	f.t.Helper()
	cm, err := f.kube.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, managerapi.CABundleConfigMap, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	certs, err := parseCerts([]byte(cm.Data[managerapi.CABundleKey]))
	if err != nil {
		f.t.Fatalf("the bundle: %v", err)
	}
	return certs
}

// managerPod returns a running manager pod on node, of the UID uid and
// the service account testSA.
func managerPod(name, uid, node string) *v1.Pod {
	return hostpathtest.ManagerPod(testNamespace, name, node, "", func(p *v1.Pod) {
		p.UID, p.Spec.ServiceAccountName = types.UID(uid), testSA
	})
}

// request describes a certificate request.
type request struct {
	key  crypto.Signer
	cn   string
	orgs []string
	dns  []string
	ips  []net.IP
	mail []string
}

// managerRequest is the request of the manager on node, with an ECDSA key.
func managerRequest(t *testing.T, node string) request {
	return request{key: ecKey(t), cn: CommonNamePrefix + node, orgs: []string{Organization}, dns: []string{managerapi.ServerName(node)}}
}

// pem encodes r as a signed PEM certificate request.
func (r request) pem(t *testing.T) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: r.cn, Organization: r.orgs},
		DNSNames: r.dns, IPAddresses: r.ips, EmailAddresses: r.mail,
	}, r.key)
	if err != nil {
		t.Fatal(err)
	}
	return encodePEM(pemRequest, der)
}

// ecKey returns a new ECDSA P-256 key.
func ecKey(t *testing.T) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newCSR returns a CSR of our signer made by the manager pod pod1 (UID
// uid1) on node1, created at t0, asking for req.
func newCSR(name string, req []byte) *certv1.CertificateSigningRequest {
	return &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)},
		Spec: certv1.CertificateSigningRequestSpec{
			SignerName: managerapi.SignerName, Request: req, Usages: serving, Username: testUsername,
			Extra: map[string]certv1.ExtraValue{
				managerapi.ExtraPodName: {pod1}, managerapi.ExtraPodUID: {uid1}, managerapi.ExtraNodeName: {node1},
				"authentication.kubernetes.io/credential-id": {"JTI=abc"},
			},
		},
	}
}

// condition returns the condition of type typ of csr, or nil.
func condition(csr *certv1.CertificateSigningRequest, typ certv1.RequestConditionType) *certv1.CertificateSigningRequestCondition {
	for i, c := range csr.Status.Conditions {
		if c.Type == typ {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}
