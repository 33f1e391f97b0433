package csr

import (
	"context"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
)

// The three controllers wired to running informers: a manager's CSR is
// approved and signed by the CA they create, and the bundle verifies the
// certificate. It waits for the fake clientset's watch events, not for
// time.
func TestControllersRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kube := k8sfake.NewClientset(managerPod(pod1, uid1, node1))
	csrs := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(SignerListOptions))
	local := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(testNamespace))
	inf := Informers{
		CSRs:       csrs.Certificates().V1().CertificateSigningRequests().Informer(),
		Pods:       local.Core().V1().Pods().Informer(),
		Secrets:    local.Core().V1().Secrets().Informer(),
		ConfigMaps: local.Core().V1().ConfigMaps().Informer(),
	}
	clk := clocktesting.NewFakeClock(t0)
	c, err := New(testConfig(), kube, inf, clk)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cmw, err := kube.CoreV1().ConfigMaps(testNamespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cmw.Stop()
	// The CSR exists before the informers start, so their first list has
	// it: the fake clientset drops events between an informer's list and
	// its watch.
	csr := newCSR("csr-1", managerRequest(t, node1).pem(t))
	if _, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Run once the four informers watch (the test's own two watches were
	// made above): the fake clientset drops what happens between an
	// informer's list and its watch.
	watching := make(chan struct{}, 8)
	kube.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		watching <- struct{}{}
		return false, nil, nil
	})
	csrs.Start(ctx.Done())
	local.Start(ctx.Done())
	for range 4 {
		select {
		case <-watching:
		case <-ctx.Done():
			t.Fatalf("the informers did not start watching: %v", ctx.Err())
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 1) }()
	var signed *certv1.CertificateSigningRequest
	for signed == nil {
		select {
		case ev := <-w.ResultChan():
			if got, ok := ev.Object.(*certv1.CertificateSigningRequest); ok && ev.Type == watch.Modified && len(got.Status.Certificate) > 0 {
				signed = got
			}
		case <-ctx.Done():
			t.Fatalf("no certificate: %v", ctx.Err())
		}
	}
	if cond := condition(signed, certv1.CertificateApproved); cond == nil || cond.Reason != ReasonApproved {
		t.Errorf("conditions = %+v, want Approved", signed.Status.Conditions)
	}
	certs, err := parseCerts(signed.Status.Certificate)
	if err != nil || len(certs) != 1 {
		t.Fatalf("status.certificate: %v", err)
	}
	var cm *v1.ConfigMap
	for cm == nil {
		select {
		case ev := <-cmw.ResultChan():
			if got, ok := ev.Object.(*v1.ConfigMap); ok && got.Name == managerapi.CABundleConfigMap {
				cm = got
			}
		case <-ctx.Done():
			t.Fatalf("no bundle: %v", ctx.Err())
		}
	}
	roots, err := parseCerts([]byte(cm.Data[managerapi.CABundleKey]))
	if err != nil {
		t.Fatal(err)
	}
	verify(t, certs[0], roots, clk.Now())
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v", err)
	}
}
