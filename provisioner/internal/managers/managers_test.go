package managers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust/trusttest"
	"hostpath.dev/provisioner/internal/podstub"
)

// managerPod is a manager pod sys/name labelled app=m on node with ip,
// Ready or not.
func managerPod(name, node, ip string, ready bool) *v1.Pod {
	return hostpathtest.ManagerPod("sys", name, node, ip, hostpathtest.PodLabels(map[string]string{"app": "m"}), hostpathtest.Readiness(ready))
}

func TestResolver(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	indexer := factory.Core().V1().Pods().Informer().GetIndexer()
	for _, p := range []*v1.Pod{
		managerPod("m1", "n1", "198.18.1.5", true),
		managerPod("m2", "n2", "198.18.2.5", false),
		managerPod("m3", "n3", "", true),
	} {
		if err := indexer.Add(podstub.From(p)); err != nil {
			t.Fatal(err)
		}
	}
	r := newResolver(t, indexer, definitions(t), labels.SelectorFromSet(labels.Set{"app": "m"}), managerapi.ServingPort, x509.NewCertPool)

	c, err := r.ForNode("n1")
	if err != nil || c.BaseURL() != "https://198.18.1.5:8443" {
		t.Fatalf("ForNode(n1) = %v, %v; want https://198.18.1.5:8443", c, err)
	}
	if again, _ := r.ForNode("n1"); again != c {
		t.Errorf("ForNode(n1) made a new client for the same address")
	}
	for _, node := range []string{"n2", "n3", "n4"} {
		var nf *NotFoundError
		if _, err := r.ForNode(node); !errors.As(err, &nf) || nf.Node != node {
			t.Errorf("ForNode(%s) error = %v, want NotFoundError", node, err)
		}
	}
	// A restarted manager pod with a new IP gets a new client.
	if err := indexer.Update(podstub.From(managerPod("m1", "n1", "198.18.1.9", true))); err != nil {
		t.Fatal(err)
	}
	if c, err := r.ForNode("n1"); err != nil || c.BaseURL() != "https://198.18.1.9:8443" {
		t.Errorf("ForNode(n1) after restart = %v, %v; want the new address", c, err)
	}

	static, err := NewStaticResolver("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := static.ForNode("any"); err != nil || c.BaseURL() != "http://127.0.0.1:8080" {
		t.Errorf("static ForNode = %v, %v", c, err)
	}
}

// TestResolverTLS checks that the clients of a Resolver verify the manager
// of the node asked for: two nodes' manager pods with the IP and port of
// one test manager, whose certificate is for the first node; a call to the
// second fails verification, as does any call while the bundle is empty or
// does not hold the manager's CA.
func TestResolverTLS(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ca := trusttest.NewCA(t, "ca")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(managerapi.Host{NodeName: "n1"})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert(t, managerapi.ServerName("n1"))}}
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	indexer := factory.Core().V1().Pods().Informer().GetIndexer()
	for _, p := range []*v1.Pod{managerPod("m1", "n1", u.Hostname(), true), managerPod("m2", "n2", u.Hostname(), true)} {
		if err := indexer.Add(podstub.From(p)); err != nil {
			t.Fatal(err)
		}
	}
	var roots atomic.Pointer[x509.CertPool]
	r := newResolver(t, indexer, definitions(t), labels.Everything(), port, roots.Load, managerapi.WithToken(managerapi.StaticToken("t")))
	host := func(node string) error {
		c, err := r.ForNode(node)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.BaseURL(), "https://") {
			t.Errorf("ForNode(%s) = %s, want https", node, c.BaseURL())
		}
		_, err = c.Host(ctx)
		return err
	}
	if err := host("n1"); err == nil || !strings.Contains(err.Error(), "no CA bundle yet") {
		t.Errorf("n1 without a bundle: %v, want no CA bundle yet", err)
	}
	roots.Store(trusttest.NewCA(t, "other").Pool())
	if err := host("n1"); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("n1 with another CA: %v, want unknown authority", err)
	}
	roots.Store(ca.Pool())
	if err := host("n1"); err != nil {
		t.Errorf("n1: %v", err)
	}
	if err := host("n2"); err == nil || !strings.Contains(err.Error(), "not n2.manager.hostpath.dev") {
		t.Errorf("n2 at the IP of n1's manager: %v, want a failed verification", err)
	}
}

// TestClientOptions checks, through a Resolver, that manager clients made
// with managerapi.CallerOptions send the token file's content, kept for
// managerapi.TokenMaxAge (a token rotated since is sent once that has passed:
// the client package's TestFileToken), and give up after the configured
// time limits, closing the connection (the handler sees its request
// canceled).
func TestClientOptions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			<-r.Context().Done()
			return
		}
		_ = json.NewEncoder(w).Encode(managerapi.Volume{Name: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken := func(tok string) {
		if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("first")
	r, err := NewStaticResolver(srv.URL, managerapi.CallerOptions(tokenFile, 20*time.Millisecond, 40*time.Millisecond)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.ForNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	// Longer than the limits set here, shorter than the defaults.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tok := range []string{"first", "rotated"} {
		writeToken(tok)
		if v, err := c.GetVolume(ctx, "default", "fast"); err != nil || v.Name != "first" {
			t.Errorf("GetVolume after the token file became %q sent %v (err %v), want the token kept, %q", tok, v, err, "first")
		}
	}
	if _, err := c.GetVolume(ctx, "default", "slow"); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Errorf("GetVolume of a stuck manager = %v, want the call's own deadline exceeded", err)
	}
	if err := c.DeleteVolume(ctx, "default", "slow", managerapi.DeleteOptions{Owner: "pv"}); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Errorf("DeleteVolume of a stuck manager = %v, want the delete's own deadline exceeded", err)
	}
}

// definition returns the HostDefinition of node and pool in phase.
func definition(node, pool string, phase hostpathv1.Phase) *hostpathv1.HostDefinition {
	return &hostpathv1.HostDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.Name(node, pool)},
		Spec:       hostpathv1.HostDefinitionSpec{NodeName: node, Pool: pool},
		Status:     hostpathv1.HostDefinitionStatus{Phase: phase},
	}
}

// definitions returns a HostDefinition cache that holds defs.
func definitions(t *testing.T, defs ...*hostpathv1.HostDefinition) cache.Indexer {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, d := range defs {
		if err := indexer.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	return indexer
}

// newResolver is NewResolver, failing the test on an error.
func newResolver(t *testing.T, pods, defs cache.Indexer, selector labels.Selector, port int, roots func() *x509.CertPool, opts ...managerapi.Option) *Resolver {
	t.Helper()
	r, err := NewResolver(pods, defs, selector, port, roots, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTargets(t *testing.T) {
	const pool = "fast"
	deleting := definition("n1", pool, hostpathv1.PhaseReady)
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = []string{"test"}
	terminatingPod := managerPod("m1", "n1", "198.18.1.5", true)
	terminatingPod.DeletionTimestamp = &metav1.Time{}
	serving := managerPod("m1", "n1", "198.18.1.5", true)
	for _, tc := range []struct {
		name           string
		defs           []*hostpathv1.HostDefinition
		pods           []*v1.Pod
		ready, pending string
	}{
		{name: "Ready and serving", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhaseReady)}, pods: []*v1.Pod{serving}, ready: "n1"},
		{name: "Ready without a manager pod", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhaseReady)}, pending: "n1"},
		{name: "Ready, manager pod not Ready", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhaseReady)},
			pods: []*v1.Pod{managerPod("m1", "n1", "198.18.1.5", false)}, pending: "n1"},
		{name: "Ready, manager pod without an IP", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhaseReady)},
			pods: []*v1.Pod{managerPod("m1", "n1", "", true)}, pending: "n1"},
		{name: "Ready, manager pod terminating", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhaseReady)},
			pods: []*v1.Pod{terminatingPod}, pending: "n1"},
		{name: "Ready, rolling update of the manager", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhaseReady)},
			pods: []*v1.Pod{serving, managerPod("m1-new", "n1", "", false)}, ready: "n1"},
		{name: "PendingForCreation", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhasePendingForCreation)}, pending: "n1"},
		{name: "PendingForCreation with a serving manager", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhasePendingForCreation)},
			pods: []*v1.Pod{serving}, pending: "n1"},
		{name: "Error", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhaseError)}, pods: []*v1.Pod{serving}},
		{name: "PendingForDeletion", defs: []*hostpathv1.HostDefinition{definition("n1", pool, hostpathv1.PhasePendingForDeletion)}, pods: []*v1.Pod{serving}},
		{name: "no phase yet", defs: []*hostpathv1.HostDefinition{definition("n1", pool, "")}, pods: []*v1.Pod{serving}},
		{name: "definition being deleted", defs: []*hostpathv1.HostDefinition{deleting}, pods: []*v1.Pod{serving}},
		{name: "other pool", defs: []*hostpathv1.HostDefinition{definition("n1", "default", hostpathv1.PhaseReady)}, pods: []*v1.Pod{serving}},
		{name: "no definition", pods: []*v1.Pod{serving}},
		{name: "nothing"},
		{
			name: "a cluster",
			defs: []*hostpathv1.HostDefinition{
				definition("n1", pool, hostpathv1.PhaseReady),
				definition("n1", "default", hostpathv1.PhaseError),
				definition("n2", pool, hostpathv1.PhaseReady),
				definition("n3", pool, hostpathv1.PhasePendingForCreation),
				definition("n4", pool, hostpathv1.PhaseReady),
				definition("n5", pool, hostpathv1.PhaseError),
				definition("n6", "default", hostpathv1.PhaseReady),
			},
			pods: []*v1.Pod{
				serving,
				managerPod("m2", "n2", "198.18.2.5", false),
				managerPod("m4", "n4", "198.18.4.5", true),
				managerPod("m5", "n5", "198.18.5.5", true),
				managerPod("m6", "n6", "198.18.6.5", true),
				managerPod("m7", "n7", "198.18.7.5", true),
				managerPod("m8", "", "", false), // not scheduled yet
			},
			ready: "n1,n4", pending: "n2,n3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			indexer := factory.Core().V1().Pods().Informer().GetIndexer()
			for _, p := range tc.pods {
				if err := indexer.Add(podstub.From(p)); err != nil {
					t.Fatal(err)
				}
			}
			r := newResolver(t, indexer, definitions(t, tc.defs...), labels.SelectorFromSet(labels.Set{"app": "m"}), managerapi.ServingPort, nil)
			ready, pending, err := r.Targets(pool)
			if err != nil || strings.Join(ready, ",") != tc.ready || strings.Join(pending, ",") != tc.pending {
				t.Errorf("Targets(%q) = %q, %q, %v; want %q, %q", pool, ready, pending, err, tc.ready, tc.pending)
			}
		})
	}
}

// failingIndexer is a cache whose index lookups fail.
type failingIndexer struct{ cache.Indexer }

func (failingIndexer) ByIndex(string, string) ([]any, error) { return nil, errors.New("cache broken") }

func TestResolverCacheErrors(t *testing.T) {
	newPods := func() cache.Indexer {
		pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		if err := pods.Add(podstub.From(managerPod("m1", "n1", "198.18.1.5", true))); err != nil {
			t.Fatal(err)
		}
		return pods
	}
	pods := newPods()
	r := newResolver(t, pods, failingIndexer{definitions(t)}, labels.Everything(), managerapi.ServingPort, nil)
	if _, _, err := r.Targets("default"); err == nil || !strings.Contains(err.Error(), "cache broken") {
		t.Errorf("Targets() with a failing HostDefinition cache: %v", err)
	}
	r = newResolver(t, failingIndexer{newPods()}, definitions(t, definition("n1", "default", hostpathv1.PhaseReady)), labels.Everything(), managerapi.ServingPort, nil)
	if _, _, err := r.Targets("default"); err == nil || !strings.Contains(err.Error(), "cache broken") {
		t.Errorf("Targets() with a failing pod cache: %v", err)
	}
	if _, err := r.ForNode("n1"); err == nil || !strings.Contains(err.Error(), "cache broken") {
		t.Errorf("ForNode() with a failing pod cache: %v", err)
	}
	// An index of the same name already there is a conflict.
	if _, err := NewResolver(pods, definitions(t), labels.Everything(), managerapi.ServingPort, nil); err == nil {
		t.Errorf("NewResolver on a pod cache indexed already: no error")
	}
}

func TestStaticTargets(t *testing.T) {
	static, err := NewStaticResolver("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := static.Targets("default"); !errors.Is(err, ErrNoTargets) {
		t.Errorf("static Targets() error = %v, want ErrNoTargets", err)
	}
}
