package app

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	hdfake "hostpath.dev/api/generated/clientset/versioned/fake"
	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust/trusttest"
	"hostpath.dev/provisioner/internal/managers"
)

// TestInformersFeedTheResolver checks the wiring of Complete without an
// API server: the HostDefinition informer and the CA bundle's start and
// sync with the others, the Resolver reads the targets of a pool from the
// HostDefinitions and from the manager pod informer, and calls the
// managers over HTTPS.
func TestInformersFeedTheResolver(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const ns = "hostpath-system"
	o := NewOptions()
	o.NodeName, o.Namespace, o.ManagerNamespace = "n1", ns, ns
	pod := func(name, node string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "hostpath-manager"}},
			Spec:       v1.PodSpec{NodeName: node},
			Status:     v1.PodStatus{PodIP: "198.18.0.1", Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
		}
	}
	def := func(node, pool string, phase hostpathv1.Phase) *hostpathv1.HostDefinition {
		return &hostpathv1.HostDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.Name(node, pool)},
			Spec:       hostpathv1.HostDefinitionSpec{NodeName: node, Pool: pool},
			Status:     hostpathv1.HostDefinitionStatus{Phase: phase},
		}
	}
	ca := trusttest.NewCA(t, "ca")
	bundle := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: managerapi.CABundleConfigMap},
		Data:       map[string]string{managerapi.CABundleKey: string(ca.PEM())},
	}
	kube := fake.NewClientset(pod("m1", "n1"), pod("m3", "n3"), bundle)
	definer := hdfake.NewSimpleClientset(
		def("n1", "default", hostpathv1.PhaseReady),
		def("n2", "default", hostpathv1.PhasePendingForCreation),
		def("n3", "default", hostpathv1.PhaseError),
	)
	inf := o.newInformers(kube, definer, false)
	r, err := o.newResolver(inf)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := inf.start(ctx)
	defer stop()
	if err != nil {
		t.Fatal(err)
	}
	ready, pending, err := r.Targets("default")
	if err != nil || !slices.Equal(ready, []string{"n1"}) || !slices.Equal(pending, []string{"n2"}) {
		t.Errorf("Targets(default) = %q, %q, %v; want [n1], [n2]", ready, pending, err)
	}
	if pool := inf.CABundle.Pool(); pool == nil || !pool.Equal(ca.Pool()) {
		t.Errorf("CA bundle after start = %v, want the ConfigMap's", pool)
	}
	if c, err := r.ForNode("n1"); err != nil || c.BaseURL() != "https://198.18.0.1:8443" {
		t.Errorf("ForNode(n1) = %v, %v; want https://198.18.0.1:8443", c, err)
	}

	// A fixed manager URL watches neither manager pods nor HostDefinitions.
	o.ManagerURL = "http://127.0.0.1:8080"
	inf = o.newInformers(kube, definer, false)
	if inf.ManagerPods != nil || inf.Definitions != nil || inf.CABundle != nil {
		t.Errorf("informers with --%s: manager pods %v, definitions %v, CA bundle %v; want none", FlagManagerURL, inf.ManagerPods, inf.Definitions, inf.CABundle)
	}
	if r, err = o.newResolver(inf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Targets("default"); !errors.Is(err, managers.ErrNoTargets) {
		t.Errorf("Targets with --%s: %v, want ErrNoTargets", FlagManagerURL, err)
	}
}

// TestOwnNodeOnly: the instance lists and watches its own Node alone (by
// field selector), reads it from that cache, and gets another Node from
// the API server only when no instance runs on it.
func TestOwnNodeOnly(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := NewOptions()
	o.NodeName, o.Namespace, o.ManagerURL = "n1", "ns", "http://127.0.0.1:8080"
	peerLabels, err := labels.ConvertSelectorToLabelsMap(o.InstanceSelector)
	if err != nil {
		t.Fatal(err)
	}
	instance := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p2", Labels: peerLabels}, Spec: v1.PodSpec{NodeName: "n2"}}
	node := func(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	kube := fake.NewClientset(node("n1"), node("n2"), node("n3"), instance)
	var selectors, gets []string
	kube.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		selectors = append(selectors, a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	kube.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		gets = append(gets, a.(k8stesting.GetAction).GetName())
		return false, nil, nil
	})
	kube.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		selectors = append(selectors, a.(k8stesting.WatchAction).GetWatchRestrictions().Fields.String())
		return false, nil, nil
	})
	inf := o.newInformers(kube, hdfake.NewSimpleClientset(), false)
	stop, err := inf.start(ctx)
	defer stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range selectors {
		if s != "metadata.name=n1" {
			t.Errorf("a list or watch of Nodes with field selector %q, want metadata.name=n1", s)
		}
	}
	if len(selectors) == 0 {
		t.Error("no list or watch of Nodes")
	}
	for _, tc := range []struct {
		node string
		want bool
	}{{"n1", true}, {"n2", true}, {"n3", true}, {"n4", false}} {
		if got, err := inf.Nodes.Exists(tc.node); err != nil || got != tc.want {
			t.Errorf("Exists(%s) = %v, %v; want %v", tc.node, got, err, tc.want)
		}
	}
	if !slices.Equal(gets, []string{"n3", "n4"}) {
		t.Errorf("GETs of Nodes %q, want [n3 n4]: not the own Node, not one with an instance", gets)
	}
}

// TestStaticManagerTLS checks an https --manager-url: verified with
// --manager-ca-file for --manager-server-name, by default the name of the
// manager of --node-name.
func TestStaticManagerTLS(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ca := trusttest.NewCA(t, "ca")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"nodeName":"n1"}`)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert(t, managerapi.ServerName("n1"), "m.example")}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	caFile, otherFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "other.crt")
	for file, data := range map[string][]byte{caFile: ca.PEM(), otherFile: trusttest.NewCA(t, "other").PEM()} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		node, caFile, serverName string
		wantErr                  string
	}{
		{node: "n1", caFile: caFile},
		{node: "n2", caFile: caFile, serverName: "m.example"},
		{node: "n2", caFile: caFile, wantErr: "not n2.manager.hostpath.dev"},
		{node: "n1", caFile: otherFile, wantErr: "unknown authority"},
	} {
		o := NewOptions()
		o.NodeName, o.Namespace, o.ManagerTokenFile = tc.node, "ns", ""
		o.ManagerURL, o.ManagerCAFile, o.ManagerServerName = srv.URL, tc.caFile, tc.serverName
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		r, err := o.newResolver(nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.ForNode(tc.node)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Host(ctx)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("node %s, server name %q, CA %s: Host = %v, want error %q", tc.node, tc.serverName, filepath.Base(tc.caFile), err, tc.wantErr)
		}
	}
	o := NewOptions()
	o.ManagerURL, o.ManagerCAFile = srv.URL, filepath.Join(dir, "missing")
	if _, err := o.newResolver(nil); err == nil || !strings.Contains(err.Error(), "--"+FlagManagerCAFile) {
		t.Errorf("newResolver with a missing CA file = %v", err)
	}
}

// TestEventClient checks that the events' client has rate limits of its
// own: not the volumes' limiter, nor their QPS and burst, and that the
// volumes' configuration is left as it was.
func TestEventClient(t *testing.T) {
	cfg := &rest.Config{Host: "https://198.18.0.1:6443", QPS: 5, Burst: 7, UserAgent: userAgent}
	volumes, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	events, err := eventClient(cfg, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	main, own := volumes.CoreV1().RESTClient().GetRateLimiter(), events.RESTClient().GetRateLimiter()
	if main == nil || own == nil || main == own {
		t.Fatalf("rate limiters: volumes %p, events %p; want two", main, own)
	}
	if own.QPS() != 50 || main.QPS() != 5 {
		t.Errorf("QPS: events %v, volumes %v; want 50 and 5", own.QPS(), main.QPS())
	}
	if cfg.QPS != 5 || cfg.Burst != 7 {
		t.Errorf("the volumes' configuration changed: QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
	// One event of each burst token: the 100th does not wait; the volumes'
	// limiter would have made the 8th wait.
	for i := range 100 {
		if !own.TryAccept() {
			t.Fatalf("event %d waits: the burst is not 100", i+1)
		}
	}
}

// TestEventsApart checks that a clientset of Complete sends its events, and
// only them, through the events' client: the library records its own
// through the clientset it is given.
func TestEventsApart(t *testing.T) {
	ctx := context.Background()
	volumes, events := fake.NewClientset(), fake.NewClientset()
	kube := eventsApart{Interface: volumes, events: events.CoreV1()}
	ev := &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1"}, Reason: "ProvisioningSucceeded"}
	if _, err := kube.CoreV1().Events("ns").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}}
	if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.CoreV1().Events("ns").Get(ctx, "e1", metav1.GetOptions{}); err != nil {
		t.Errorf("the event is not on the events' client: %v", err)
	}
	if _, err := volumes.CoreV1().Events("ns").Get(ctx, "e1", metav1.GetOptions{}); err == nil {
		t.Error("the event went through the volumes' client")
	}
	if _, err := volumes.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{}); err != nil {
		t.Errorf("the PV is not on the volumes' client: %v", err)
	}
	if _, err := events.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{}); err == nil {
		t.Error("the PV went through the events' client")
	}
}

// TestDroppedEvents: through a clientset of Complete, a broadcaster (as the
// library's) records every event but the library's Normal Provisioning; a
// Warning of that reason still goes.
func TestDroppedEvents(t *testing.T) {
	ctx := t.Context()
	events := fake.NewClientset()
	kube := eventsApart{Interface: fake.NewClientset(), events: events.CoreV1()}
	b := record.NewBroadcaster(record.WithContext(ctx))
	defer b.Shutdown()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	r := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "test"})
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"}}
	r.Event(claim, v1.EventTypeNormal, "Provisioning", "External provisioner is provisioning volume for claim \"ns/c\"")
	r.Event(claim, v1.EventTypeWarning, "Provisioning", "a warning of the same reason")
	r.Event(claim, v1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume pv")
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := events.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = got[:0]
		for _, e := range list.Items {
			got = append(got, e.Type+" "+e.Reason)
		}
		return slices.Contains(got, "Normal ProvisioningSucceeded"), nil
	})
	if err != nil {
		t.Fatalf("events %q: %v", got, err)
	}
	slices.Sort(got)
	if want := []string{"Normal ProvisioningSucceeded", "Warning Provisioning"}; !slices.Equal(got, want) {
		t.Errorf("events recorded = %q, want %q", got, want)
	}
}
