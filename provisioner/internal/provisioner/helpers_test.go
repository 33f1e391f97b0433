package provisioner

import (
	"errors"
	"k8s.io/apimachinery/pkg/api/equality"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

const (
	testProvisioner = "hostpath.dev/provisioner"
	selfNode        = "node-a"
	otherNode       = "node-b"
	idleNode        = "node-c" // exists, runs no provisioner
)

// testNames are the provisioner names of the tests' instance.
var testNames = hostpathv1.NewProvisionerNames(testProvisioner)

// newManagers returns the managers of nodes, each with the pools default
// and fast under /var/hpvolumes.
func newManagers(nodes ...string) *managertest.Fake {
	f := managertest.New()
	for _, n := range nodes {
		for _, p := range []string{"default", "fast"} {
			f.Node(n).AddPool(managerapi.Pool{Name: p, Path: "/var/hpvolumes"})
		}
	}
	return f
}

// directory is the directory name of pool, owned by owner ("" for none), whose
// owner record names the claim namespace ns ("" for none).
func directory(pool, name, owner, ns string) managerapi.Volume {
	return managerapi.Volume{Pool: pool, Name: name, Owner: owner, ClaimNamespace: ns}
}

// writes are the calls that make or remove a directory.
var writes = []managertest.Method{managertest.CreateVolume, managertest.CloneVolume, managertest.DeleteVolume}

// fail makes the calls of methods to the manager of node answer err;
// nothing when err is nil.
func fail(f *managertest.Fake, node string, err error, methods ...managertest.Method) {
	if err == nil {
		return
	}
	for _, m := range methods {
		f.Fail(managertest.Failure{Node: node, Method: m, Err: err})
	}
}

// callsOf returns m's calls of method, failed ones too, as the tests
// compare them: "pool" (ListVolumes), "pool/name" (GetVolume), "pool/name
// mode size by owner" (CreateVolume), "pool/name from pool/name of owner
// size by owner" (CloneVolume), "pool/name previous->owner[ multihost]"
// (SetOwner), "pool/name by owner" (DeleteVolume).
func callsOf(m *managertest.Manager, method managertest.Method) []string {
	var out []string
	for _, c := range m.Calls() {
		if c.Method != method {
			continue
		}
		s := c.Pool + "/" + c.Name
		switch r := c.Request.(type) {
		case nil:
			s = strings.TrimSuffix(s, "/")
		case managerapi.CreateVolumeRequest:
			s += " " + r.Mode + " " + resource.NewQuantity(r.RequiredBytes, resource.BinarySI).String() + " by " + r.Owner
		case managerapi.CloneVolumeRequest:
			s += " from " + r.SourcePool + "/" + r.SourceName + " of " + r.SourceOwner + " " + resource.NewQuantity(r.RequiredBytes, resource.BinarySI).String() + " by " + r.Owner
		case managerapi.SetOwnerRequest:
			s += " " + r.Previous + "->" + r.Owner
			if r.Multihost {
				s += " multihost"
			}
		case managerapi.DeleteOptions:
			s += " by " + r.Owner
		}
		out = append(out, s)
	}
	return out
}

// lastCreate returns the request of m's last CreateVolume call (none: the
// zero request).
func lastCreate(m *managertest.Manager) managerapi.CreateVolumeRequest {
	var req managerapi.CreateVolumeRequest
	for _, c := range m.Calls() {
		if c.Method == managertest.CreateVolume {
			req = c.Request.(managerapi.CreateVolumeRequest)
		}
	}
	return req
}

// ownerOf returns the owner of a directory of m, and false when it does
// not exist.
func ownerOf(m *managertest.Manager, pool, name string) (string, bool) {
	v, ok := m.Volume(pool, name)
	return v.Owner, ok
}

// namespaceOf returns the claim namespace recorded for a directory of m.
func namespaceOf(m *managertest.Manager, pool, name string) string {
	v, _ := m.Volume(pool, name)
	return v.ClaimNamespace
}

// fixture is a Provisioner and its ClaimSync on selfNode over fake caches.
type fixture struct {
	prov     *Provisioner
	sync     *ClaimSync
	claims   cache.Indexer
	kube     *fake.Clientset
	recorder *record.FakeRecorder
	// managers are the managers; manager, selfNode's, answers for every
	// node.
	managers *managertest.Fake
	manager  *managertest.Manager
}

// newFixture puts the objects in the informer caches; PVs and claims also on
// the fake API server.
func newFixture(t *testing.T, inst responsibilitytest.Instances, objects ...any) *fixture {
	t.Helper()
	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	classes := factory.Storage().V1().StorageClasses()
	nodes := factory.Core().V1().Nodes()
	volumes := factory.Core().V1().PersistentVolumes()
	claims := factory.Core().V1().PersistentVolumeClaims()
	for _, obj := range objects {
		var err error
		switch o := obj.(type) {
		case *storagev1.StorageClass:
			err = classes.Informer().GetIndexer().Add(o)
		case *v1.Node:
			err = nodes.Informer().GetIndexer().Add(o)
		case *v1.PersistentVolume:
			err = errors.Join(volumes.Informer().GetIndexer().Add(o), kube.Tracker().Add(o))
		case *v1.PersistentVolumeClaim:
			err = errors.Join(claims.Informer().GetIndexer().Add(o), kube.Tracker().Add(o))
		default:
			t.Fatalf("unexpected object %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{kube: kube, claims: claims.Informer().GetIndexer(), recorder: record.NewFakeRecorder(100), managers: newManagers(selfNode)}
	f.manager = f.managers.Node(selfNode)
	f.prov = New(Config{
		Names:     testNames,
		Node:      selfNode,
		Client:    kube,
		Classes:   classes.Lister(),
		Nodes:     nodes.Lister(),
		Volumes:   volumes.Lister(),
		Claims:    claims.Lister(),
		ClonePoll: time.Millisecond,
		Instances: inst,
		Managers:  func(string) (VolumeManager, error) { return f.manager, nil },
		Recorder:  f.recorder,
	})
	f.sync = NewClaimSync(f.prov, claims, f.recorder)
	t.Cleanup(f.sync.queue.ShutDown)
	return f
}

func node(name, hostname string) *v1.Node {
	return hostpathtest.Node(name, hostpathtest.Hostname(hostname))
}

func testNodes() []any {
	return []any{node(selfNode, selfNode+"-host"), node(otherNode, otherNode), node(idleNode, idleNode)}
}

func class(name string, binding storagev1.VolumeBindingMode, params map[string]string) *storagev1.StorageClass {
	return hostpathtest.Class(name, testProvisioner, hostpathtest.Binding(binding), hostpathtest.Parameters(params))
}

func testClasses() []any {
	other := class("other", storagev1.VolumeBindingImmediate, nil)
	other.Provisioner = "example.com/other"
	capacityAware := class("capacity", storagev1.VolumeBindingWaitForFirstConsumer, nil)
	capacityAware.Provisioner = hostpathv1.CapacityProvisionerName
	return []any{
		class("immediate", storagev1.VolumeBindingImmediate, nil),
		class("wffc", storagev1.VolumeBindingWaitForFirstConsumer, nil),
		capacityAware,
		class("multihost", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost"}),
		other,
	}
}

// claim returns a claim of className with annotations given as key=value.
func claim(className string, keyValues ...string) *v1.PersistentVolumeClaim {
	c := hostpathtest.Claim("ns", "data", hostpathtest.ClaimOfClass(className))
	c.UID, c.ResourceVersion, c.Annotations = "0000-uid", "7", map[string]string{}
	for _, kv := range keyValues {
		k, v, _ := strings.Cut(kv, "=")
		c.Annotations[k] = v
	}
	return c
}

// volume returns a node-mode PV of this provisioner named name whose
// annotations name dir of pool on nodeName, made for claim ns/claimName.
func volume(name, nodeName, pool, dir, claimName string) *v1.PersistentVolume {
	return hostpathtest.NodePV(name, nodeName, hostpathtest.InPool(pool), hostpathtest.InDirectory(dir), hostpathtest.MadeFor("team-a", claimName),
		hostpathtest.Annotation(hostpathv1.AnnotationSizeEnforcement, hostpathv1.EnforcementNone))
}

// checkPV checks the PV Provision returned against want (nil: none) and
// reports whether the case goes on (a PV was wanted).
func checkPV(t *testing.T, pv, want *v1.PersistentVolume) bool {
	t.Helper()
	if want == nil {
		if pv != nil {
			t.Errorf("pv = %v, want nil", pv)
		}
		return false
	}
	if !equality.Semantic.DeepEqual(pv, want) {
		t.Errorf("pv =\n%#v\nwant\n%#v", pv, want)
	}
	return true
}
