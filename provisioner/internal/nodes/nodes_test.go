package nodes

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

const self = "node-a"

func node(name string, lbls map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, Annotations: map[string]string{"big": "status"}}}
}

// fixture is a Lookup over a fake API server that holds node-b (with an
// instance), node-c (without one, a control-plane node) and this
// instance's node-a, whose own cache holds node-a.
type fixture struct {
	lookup *Lookup
	kube   *fake.Clientset
	clock  *clocktesting.FakeClock
	gets   map[string]int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		kube:  fake.NewClientset(node(self, nil), node("node-b", nil), node("node-c", map[string]string{"node-role.kubernetes.io/control-plane": ""})),
		clock: clocktesting.NewFakeClock(time.Now()),
		gets:  map[string]int{},
	}
	f.kube.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.gets[a.(k8stesting.GetAction).GetName()]++
		return false, nil, nil
	})
	own := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := own.Add(node(self, map[string]string{"zone": "z1"})); err != nil {
		t.Fatal(err)
	}
	trim := func(obj any) (any, error) {
		n := obj.(*v1.Node).DeepCopy()
		n.Annotations = nil
		return n, nil
	}
	f.lookup = New(Config{Node: self, Own: corelisters.NewNodeLister(own), API: f.kube.CoreV1(), Peers: responsibilitytest.Instances{On: []string{"node-b"}},
		Transform: trim, TTL: time.Minute, Clock: f.clock})
	return f
}

// TestExists: a Node with an instance, and this instance's own, exist
// without a question to the API server; of another, a Node found is kept
// for the TTL, until Forget; a missing one is asked about afresh each
// time.
func TestExists(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name     string
		node     string
		advance  time.Duration
		forget   bool
		want     bool
		wantGets int
	}{
		{"own node, from its cache", self, 0, false, true, 0},
		{"a node with an instance", "node-b", 0, false, true, 0},
		{"a node without one, asked", "node-c", 0, false, true, 1},
		{"again, kept", "node-c", 0, false, true, 1},
		{"a deleted node, asked", "node-gone", 0, false, false, 1},
		{"again, asked afresh", "node-gone", 0, false, false, 2},
		{"after Forget, asked again", "node-gone", 0, true, false, 3},
		{"within the TTL, kept", "node-c", 59 * time.Second, false, true, 1},
		{"after the TTL, asked again", "node-c", 2 * time.Second, false, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.clock.Step(tc.advance)
			if tc.forget {
				f.lookup.Forget(tc.node)
			}
			got, err := f.lookup.Exists(tc.node)
			if err != nil || got != tc.want {
				t.Errorf("Exists(%q) = %v, %v; want %v", tc.node, got, err, tc.want)
			}
			if f.gets[tc.node] != tc.wantGets {
				t.Errorf("GETs of Node %q = %d, want %d", tc.node, f.gets[tc.node], tc.wantGets)
			}
		})
	}
}

// TestGet: Get is a lister's Get: this instance's Node from its cache,
// another from the API server, trimmed, a missing one a NotFound error;
// an error of the API server is returned and not kept.
func TestGet(t *testing.T) {
	f := newFixture(t)
	own, err := f.lookup.Get(self)
	if err != nil || own.Labels["zone"] != "z1" || f.gets[self] != 0 {
		t.Errorf("Get(own) = %v, %v after %d GETs; want the cached Node, no GET", own, err, f.gets[self])
	}
	// An instance on node-b does not make up a Node: Get asks.
	n, err := f.lookup.Get("node-b")
	if err != nil || n.Name != "node-b" || n.Annotations != nil || f.gets["node-b"] != 1 {
		t.Errorf("Get(node-b) = %v, %v after %d GETs; want it trimmed, one GET", n, err, f.gets["node-b"])
	}
	for range 2 {
		if _, err := f.lookup.Get("node-gone"); !apierrors.IsNotFound(err) {
			t.Errorf("Get(node-gone) error = %v, want NotFound", err)
		}
	}
	if f.gets["node-gone"] != 1 {
		t.Errorf("GETs of node-gone = %d, want 1: Get keeps a NotFound", f.gets["node-gone"])
	}
	// A name no Node can have (a claim's annotation says anything) is
	// NotFound, and the API server is not asked.
	for _, name := range []string{"../../x", "/etc/passwd", "Node_A", ""} {
		if _, err := f.lookup.Get(name); !apierrors.IsNotFound(err) {
			t.Errorf("Get(%q) error = %v, want NotFound", name, err)
		}
		if ok, err := f.lookup.Exists(name); ok || err != nil {
			t.Errorf("Exists(%q) = %v, %v; want false, nil", name, ok, err)
		}
		if f.gets[name] != 0 {
			t.Errorf("GETs of Node %q = %d, want 0", name, f.gets[name])
		}
	}
	boom := errors.New("connection refused")
	f.kube.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.gets[a.(k8stesting.GetAction).GetName()]++
		return true, nil, boom
	})
	for range 2 {
		if _, err := f.lookup.Get("node-d"); !errors.Is(err, boom) {
			t.Errorf("Get(node-d) error = %v, want %v", err, boom)
		}
		if ok, err := f.lookup.Exists("node-d"); ok || !errors.Is(err, boom) {
			t.Errorf("Exists(node-d) = %v, %v; want false, %v", ok, err, boom)
		}
	}
	if f.gets["node-d"] != 4 {
		t.Errorf("GETs of node-d = %d, want 4: an error is not kept", f.gets["node-d"])
	}
}
