package capacity

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
)

const (
	selfNode  = "node-a"
	otherNode = "node-b"
	// selfHost is selfNode's kubernetes.io/hostname label: not its name.
	selfHost         = "host-a.example.com"
	testNamespace    = "hostpath-system"
	testFieldManager = "hostpath-provisioner"
	testInterval     = time.Minute
	mi               = int64(1) << 20
	gi               = int64(1) << 30
)

// testNames are the provisioner names of the tests' instance.
var testNames = hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName)

// start is the fake clock's time at the start of every test.
var start = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// newManager returns the managers of the tests: selfNode's has pools.
func newManager(pools ...managerapi.Pool) *managertest.Fake {
	f := managertest.New()
	setPools(f, pools...)
	return f
}

// setPools adds pools to selfNode's manager, or replaces what it says of
// them.
func setPools(f *managertest.Fake, pools ...managerapi.Pool) {
	for _, p := range pools {
		f.Node(selfNode).AddPool(p)
	}
}

// pool is a pool of a 100 GiB filesystem (threshold 1 GiB) with available
// bytes free.
func pool(name string, available int64) managerapi.Pool {
	return managerapi.Pool{Name: name, Path: "/var/" + name, CapacityBytes: 100 * gi, FreeBytes: available, OvercommitRatio: 1,
		AvailableBytes: available, Enforcement: managerapi.EnforcementXFS}
}

// newNode is a worker Node of that name and hostname label ("" for none).
func newNode(name, hostname string) *v1.Node {
	return hostpathtest.Node(name, hostpathtest.Hostname(hostname), hostpathtest.NodeLabel("kind", "worker"))
}

// newClass is a StorageClass of provisioner with binding and parameters.
func newClass(name, provisioner string, binding storagev1.VolumeBindingMode, params map[string]string) *storagev1.StorageClass {
	return hostpathtest.Class(name, provisioner, hostpathtest.Binding(binding), hostpathtest.Parameters(params))
}

// capacityClass is a capacity-aware WaitForFirstConsumer class of pool.
func capacityClass(name, pool string) *storagev1.StorageClass {
	return newClass(name, hostpathv1.CapacityProvisionerName, storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{hostpathv1.ParamPool: pool})
}

// published is the object selfNode publishes for class with available
// bytes, as the Publisher makes it.
func published(class string, available int64) *storagev1.CSIStorageCapacity {
	return object(testNamespace, capacityClass(class, "unused"), newNode(selfNode, selfHost), selfHost, available)
}

// fixture is a Publisher of selfNode over caches filled by hand and a fake
// API server holding the same objects.
type fixture struct {
	pub        *Publisher
	kube       *fake.Clientset
	manager    *managertest.Fake
	clock      *clocktesting.FakeClock
	capacities cache.Indexer
}

// newFixture puts objs (Nodes, StorageClasses, CSIStorageCapacities) in
// the clientset and in the caches (the capacities' cache keeps those
// Selector(selfNode) selects, as the informer would).
func newFixture(t *testing.T, mgr *managertest.Fake, interval time.Duration, objs ...runtime.Object) *fixture {
	t.Helper()
	kube := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	classes, nodes, capacities := factory.Storage().V1().StorageClasses(), factory.Core().V1().Nodes(), factory.Storage().V1().CSIStorageCapacities()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *storagev1.StorageClass:
			err = classes.Informer().GetIndexer().Add(o)
		case *v1.Node:
			err = nodes.Informer().GetIndexer().Add(o)
		case *storagev1.CSIStorageCapacity:
			err = capacities.Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{kube: kube, manager: mgr, clock: clocktesting.NewFakeClock(start), capacities: capacities.Informer().GetIndexer()}
	f.pub = New(Config{
		ProvisionerNames: testNames, Node: selfNode, Namespace: testNamespace, FieldManager: testFieldManager,
		Client: kube, Classes: classes.Lister(), Nodes: nodes.Lister(), Capacities: capacities.Lister(),
		Synced: []cache.InformerSynced{func() bool { return true }},
		Managers: func(node string) (Manager, error) {
			if node != selfNode {
				t.Errorf("Managers(%q), want only %q", node, selfNode)
			}
			return mgr.Node(node), nil
		},
		Interval: interval, Clock: f.clock,
	})
	t.Cleanup(f.pub.queue.ShutDown)
	return f
}

// syncCache makes the capacities' cache hold what the API server holds of
// selfNode, as the informer would once the writes came back.
func (f *fixture) syncCache(t *testing.T) {
	t.Helper()
	list, err := f.kube.StorageV1().CSIStorageCapacities(testNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: Selector(selfNode).String()})
	if err != nil {
		t.Fatal(err)
	}
	hostpathtest.Replace(t, f.capacities, list)
}

// stored returns the object name from the API server, nil when absent.
func (f *fixture) stored(t *testing.T, name string) *storagev1.CSIStorageCapacity {
	t.Helper()
	obj, err := f.kube.StorageV1().CSIStorageCapacities(testNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return obj
}

// writes returns the writes of CSIStorageCapacities since the last call,
// as "create CLASS CAPACITY", "update CLASS CAPACITY" or "delete NAME",
// checking the field manager; any other write fails the test.
func (f *fixture) writes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range hostpathtest.Writes(f.kube.Actions()) {
		if a.GetResource().Resource != "csistoragecapacities" || a.GetNamespace() != testNamespace {
			t.Errorf("unexpected write %s %s in %q", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
			continue
		}
		switch a := a.(type) {
		case k8stesting.CreateActionImpl:
			obj := a.GetObject().(*storagev1.CSIStorageCapacity)
			if a.CreateOptions.FieldManager != testFieldManager {
				t.Errorf("create of %s: field manager %q", obj.Name, a.CreateOptions.FieldManager)
			}
			out = append(out, fmt.Sprintf("create %s %s", obj.StorageClassName, obj.Capacity))
		case k8stesting.UpdateActionImpl:
			obj := a.GetObject().(*storagev1.CSIStorageCapacity)
			if a.UpdateOptions.FieldManager != testFieldManager {
				t.Errorf("update of %s: field manager %q", obj.Name, a.UpdateOptions.FieldManager)
			}
			out = append(out, fmt.Sprintf("update %s %s", obj.StorageClassName, obj.Capacity))
		case k8stesting.DeleteActionImpl:
			out = append(out, "delete "+a.GetName())
		default:
			t.Errorf("unexpected write %s", a.GetVerb())
		}
	}
	f.kube.ClearActions()
	return out
}
