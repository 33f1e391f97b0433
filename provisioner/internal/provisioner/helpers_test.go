package provisioner

import (
	"context"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"hostpath.dev/manager/pkg/client"
)

const (
	testProvisioner = "hostpath.dev/provisioner"
	selfNode        = "node-a"
	otherNode       = "node-b"
	idleNode        = "node-c" // exists, runs no provisioner
)

// fakeInstances elects a fixed instance for every key.
type fakeInstances struct {
	elected bool
	nodes   []string // nodes with an instance
}

func (f fakeInstances) IsOwner(string) (bool, error) { return f.elected, nil }
func (f fakeInstances) OnNode(node string) (bool, error) {
	for _, n := range f.nodes {
		if n == node {
			return true, nil
		}
	}
	return false, nil
}

// fakeManager records calls and answers with err (or a volume).
type fakeManager struct {
	mu      sync.Mutex
	err     error
	creates []string // pool/name mode bytes
	deletes []string // pool/name
}

func (f *fakeManager) CreateVolume(_ context.Context, pool, name string, req client.CreateVolumeRequest) (*client.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, pool+"/"+name+" "+req.Mode+" "+resource.NewQuantity(req.RequiredBytes, resource.BinarySI).String())
	if f.err != nil {
		return nil, f.err
	}
	return &client.Volume{Name: name, Pool: pool, Path: "/var/hpvolumes/" + name, Mode: req.Mode}, nil
}

func (f *fakeManager) DeleteVolume(_ context.Context, pool, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, pool+"/"+name)
	return f.err
}

// fixture is a Provisioner on selfNode over fake caches.
type fixture struct {
	prov     *Provisioner
	kube     *fake.Clientset
	recorder *record.FakeRecorder
	manager  *fakeManager
}

func newFixture(t *testing.T, inst fakeInstances, objects ...any) *fixture {
	t.Helper()
	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	classes := factory.Storage().V1().StorageClasses()
	nodes := factory.Core().V1().Nodes()
	for _, obj := range objects {
		var err error
		switch o := obj.(type) {
		case *storagev1.StorageClass:
			err = classes.Informer().GetIndexer().Add(o)
		case *v1.Node:
			err = nodes.Informer().GetIndexer().Add(o)
		default:
			t.Fatalf("unexpected object %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{kube: kube, recorder: record.NewFakeRecorder(100), manager: &fakeManager{}}
	f.prov = New(Config{
		Name:      testProvisioner,
		Node:      selfNode,
		Client:    kube,
		Classes:   classes.Lister(),
		Nodes:     nodes.Lister(),
		Instances: inst,
		Managers:  func(string) (VolumeManager, error) { return f.manager, nil },
		Recorder:  f.recorder,
	})
	return f
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func node(name, hostname string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: hostname}}}
}

func testNodes() []any {
	return []any{node(selfNode, selfNode+"-host"), node(otherNode, otherNode), node(idleNode, idleNode)}
}

func class(name string, mode storagev1.VolumeBindingMode, params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       testProvisioner,
		Parameters:        params,
		VolumeBindingMode: &mode,
	}
}

func testClasses() []any {
	other := class("other", storagev1.VolumeBindingImmediate, nil)
	other.Provisioner = "example.com/other"
	return []any{
		class("immediate", storagev1.VolumeBindingImmediate, nil),
		class("wffc", storagev1.VolumeBindingWaitForFirstConsumer, nil),
		class("multihost", storagev1.VolumeBindingImmediate, map[string]string{ParamMode: "multihost"}),
		other,
	}
}

// claim returns a claim of className with annotations given as key=value.
func claim(className string, annotations ...string) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "data", UID: types.UID("0000-uid"), ResourceVersion: "7",
			Annotations: map[string]string{},
		},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceStorage: resource.MustParse("1Gi"),
			}},
		},
	}
	for _, kv := range annotations {
		k, v, _ := strings.Cut(kv, "=")
		c.Annotations[k] = v
	}
	return c
}
