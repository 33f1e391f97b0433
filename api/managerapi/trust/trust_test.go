package trust

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust/trusttest"
)

// trusts reports whether pool verifies a server certificate of ca.
func trusts(t *testing.T, pool *x509.CertPool, ca *trusttest.CA) bool {
	t.Helper()
	leaf := ca.ServerCert(t, "n1.manager.hostpath.dev").Leaf
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "n1.manager.hostpath.dev"})
	return pool != nil && err == nil
}

func TestBundle(t *testing.T) {
	ca1, ca2 := trusttest.NewCA(t, "ca1"), trusttest.NewCA(t, "ca2")
	b := NewBundle()
	if b.Pool() != nil || b.PEM() != nil {
		t.Fatalf("new Bundle: Pool %v, PEM %q; want nil", b.Pool(), b.PEM())
	}
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("k")})
	broken := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	bad := map[string][]byte{"empty": nil, "not PEM": []byte("hello"), "no certificate": key, "a broken certificate": append(ca1.PEM(), broken...)}
	for name, data := range bad {
		if err := b.Set(data); err == nil {
			t.Errorf("Set(%s) succeeded", name)
		}
	}
	if b.Pool() != nil {
		t.Fatalf("Pool after failed Sets = %v, want nil", b.Pool())
	}

	both := append(append(append([]byte("# the bundle\n"), ca1.PEM()...), key...), ca2.PEM()...)
	if err := b.Set(both); err != nil {
		t.Fatal(err)
	}
	if !trusts(t, b.Pool(), ca1) || !trusts(t, b.Pool(), ca2) || !bytes.Equal(b.PEM(), both) {
		t.Errorf("after Set of both CAs: trusts ca1 %v, ca2 %v; PEM %q", trusts(t, b.Pool(), ca1), trusts(t, b.Pool(), ca2), b.PEM())
	}
	b.PEM()[0] = 'X' // a copy
	both[0] = 'X'    // Set kept a copy
	if b.PEM()[0] != '#' {
		t.Errorf("PEM shares memory with the caller")
	}
	for name, data := range bad {
		if err := b.Set(data); err == nil {
			t.Errorf("Set(%s) succeeded", name)
		}
		if !trusts(t, b.Pool(), ca1) || !trusts(t, b.Pool(), ca2) {
			t.Errorf("Set(%s) did not keep the last pool", name)
		}
	}
	if err := b.Set(ca2.PEM()); err != nil {
		t.Fatal(err)
	}
	if trusts(t, b.Pool(), ca1) || !trusts(t, b.Pool(), ca2) {
		t.Errorf("after Set of ca2: trusts ca1 %v, ca2 %v; want only ca2", trusts(t, b.Pool(), ca1), trusts(t, b.Pool(), ca2))
	}
}

// TestBundleConcurrent is for the race detector.
func TestBundleConcurrent(t *testing.T) {
	pems := [][]byte{trusttest.NewCA(t, "ca1").PEM(), trusttest.NewCA(t, "ca2").PEM()}
	b := NewBundle()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				if i%2 == 0 {
					_ = b.Set(pems[j%2])
				} else if p := b.Pool(); p != nil && len(b.PEM()) == 0 {
					t.Error("a pool without PEM")
				}
			}
		}()
	}
	wg.Wait()
}

func TestLoadFile(t *testing.T) {
	ca := trusttest.NewCA(t, "ca")
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(good, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := LoadFile(good); err != nil || !trusts(t, b.Pool(), ca) {
		t.Errorf("LoadFile(good) = %v, %v", b, err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing")} {
		if _, err := LoadFile(path); err == nil {
			t.Errorf("LoadFile(%s) succeeded", path)
		}
	}
}

// TestWatch follows the ConfigMap through a CA rotation, bad content and
// its deletion, with the fake clientset: the step after an event waits
// until the handler is done with it.
func TestWatch(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const ns = "hostpath-system"
	ca1, ca2, stranger := trusttest.NewCA(t, "ca1"), trusttest.NewCA(t, "ca2"), trusttest.NewCA(t, "stranger")
	// Another ConfigMap of the namespace (which the API server's field
	// selector would leave out, the fake one does not) and one of the
	// name in another namespace.
	kube := fake.NewClientset(
		trusttest.ConfigMap(ns, managerapi.CABundleConfigMap, ca1.PEM()),
		trusttest.ConfigMap(ns, "other", stranger.PEM()),
		trusttest.ConfigMap("elsewhere", managerapi.CABundleConfigMap, stranger.PEM()),
	)
	// The fake clientset has no resource versions: changes made between
	// the informer's list and its watch would be lost, so wait for the
	// watch.
	watching := make(chan struct{})
	var once sync.Once
	kube.PrependWatchReactor("configmaps", func(action clienttesting.Action) (bool, watch.Interface, error) {
		opts := action.(clienttesting.WatchActionImpl).ListOptions
		if opts.FieldSelector != "metadata.name="+managerapi.CABundleConfigMap || action.GetNamespace() != ns {
			t.Errorf("watch of %q, field selector %q; want the one ConfigMap", action.GetNamespace(), opts.FieldSelector)
		}
		w, err := kube.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		once.Do(func() { close(watching) })
		return true, w, err
	})
	handled := make(chan struct{}, 10)
	b := NewBundle()
	synced, err := watchBundle(ctx, kube.CoreV1().ConfigMaps(ns), kube, ns, b, func() { handled <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		t.Fatal("not synced")
	}
	if !trusts(t, b.Pool(), ca1) || trusts(t, b.Pool(), stranger) {
		t.Fatalf("after sync: trusts ca1 %v, stranger %v; want ca1 only", trusts(t, b.Pool(), ca1), trusts(t, b.Pool(), stranger))
	}
	<-watching
	for len(handled) > 0 { // the adds of the list
		<-handled
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	for _, step := range []struct {
		name   string
		change func() error
		want   []*trusttest.CA
	}{
		{"both CAs", func() error {
			_, err := cms.Update(ctx, trusttest.ConfigMap(ns, managerapi.CABundleConfigMap, append(ca1.PEM(), ca2.PEM()...)), metav1.UpdateOptions{})
			return err
		}, []*trusttest.CA{ca1, ca2}},
		{"the new CA alone", func() error {
			_, err := cms.Update(ctx, trusttest.ConfigMap(ns, managerapi.CABundleConfigMap, ca2.PEM()), metav1.UpdateOptions{})
			return err
		}, []*trusttest.CA{ca2}},
		{"no certificate", func() error {
			_, err := cms.Update(ctx, trusttest.ConfigMap(ns, managerapi.CABundleConfigMap, []byte("oops")), metav1.UpdateOptions{})
			return err
		}, []*trusttest.CA{ca2}},
		{"deleted", func() error { return cms.Delete(ctx, managerapi.CABundleConfigMap, metav1.DeleteOptions{}) }, []*trusttest.CA{ca2}},
		{"made again", func() error {
			_, err := cms.Create(ctx, trusttest.ConfigMap(ns, managerapi.CABundleConfigMap, ca1.PEM()), metav1.CreateOptions{})
			return err
		}, []*trusttest.CA{ca1}},
	} {
		if err := step.change(); err != nil {
			t.Fatal(err)
		}
		<-handled
		var got []string
		for _, ca := range []*trusttest.CA{ca1, ca2, stranger} {
			if trusts(t, b.Pool(), ca) {
				got = append(got, ca.Cert.Subject.CommonName)
			}
		}
		var want []string
		for _, ca := range step.want {
			want = append(want, ca.Cert.Subject.CommonName)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: trusts %q, want %q", step.name, got, want)
		}
	}
}

func TestWatchEmpty(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	b := NewBundle()
	synced, err := Watch(ctx, fake.NewClientset(), "hostpath-system", b)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced) || b.Pool() != nil {
		t.Errorf("synced without a ConfigMap: pool %v, want nil", b.Pool())
	}
}
