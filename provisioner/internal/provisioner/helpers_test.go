package provisioner

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/api/equality"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
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

// fakeInstances are the instances of the tests: this one wins every
// election or none, and instances run on the nodes of On.
type fakeInstances = responsibilitytest.Instances

// fakeManager keeps directories with owner records by the manager's rules,
// records calls, and answers err (when set) to creates and deletes.
type fakeManager struct {
	mu          sync.Mutex
	err         error
	setOwnerErr error
	volumes     map[string]*managerapi.Volume // by pool/name
	creates     []string                      // pool/name dirMode bytes by owner
	deletes     []string                      // pool/name by owner
	setOwners   []string                      // pool/name previous->owner
	gets        []string                      // pool/name
	lists       []string                      // pool
	root        string                        // the pool's host path; /var/hpvolumes when empty
	lastCreate  managerapi.CreateVolumeRequest
	clones      []string // pool/name from pool/name of owner, by owner
	// copying is how many clone calls answer a copy in progress before
	// one answers it done.
	copying int
}

// path returns the host path of a directory.
func (f *fakeManager) path(name string) string {
	if f.root != "" {
		return f.root + "/" + name
	}
	return "/var/hpvolumes/" + name
}

// ownerConflict is the manager's 409 OwnerConflict naming owner.
func ownerConflict(owner string) error {
	return fmt.Errorf("PUT /v1/pools/default/volumes/x: %w", &managerapi.Error{StatusCode: 409, Status: managerapi.Status{
		Reason: managerapi.ReasonOwnerConflict, Message: "the directory belongs to " + owner, Owner: owner}})
}

// answer is the manager's error of reason.
func answer(reason managerapi.Reason) error {
	return fmt.Errorf("GET /v1/pools/default/volumes/x: %w", &managerapi.Error{StatusCode: reason.HTTPStatus(), Status: managerapi.Status{Reason: reason, Message: "m"}})
}

// have adds a directory owned by owner ("" for none) to the fake.
func (f *fakeManager) have(pool, name, owner string) {
	f.haveIn(pool, name, owner, "")
}

// haveIn adds a directory owned by owner ("" for none) whose owner record
// names the claim namespace ns ("" for none) to the fake.
func (f *fakeManager) haveIn(pool, name, owner, ns string) {
	if f.volumes == nil {
		f.volumes = map[string]*managerapi.Volume{}
	}
	f.volumes[pool+"/"+name] = &managerapi.Volume{Name: name, Pool: pool, Path: f.path(name), Mode: "0777", Owner: owner, ClaimNamespace: ns}
}

// namespace returns the claim namespace recorded for a directory.
func (f *fakeManager) namespace(pool, name string) string {
	if v, ok := f.volumes[pool+"/"+name]; ok {
		return v.ClaimNamespace
	}
	return ""
}

// owner returns the owner of a directory, and false when it does not exist.
func (f *fakeManager) owner(pool, name string) (string, bool) {
	v, ok := f.volumes[pool+"/"+name]
	if !ok {
		return "", false
	}
	return v.Owner, true
}

func (f *fakeManager) ListVolumes(_ context.Context, pool string) (*managerapi.VolumeList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, pool)
	l := &managerapi.VolumeList{}
	for _, v := range f.volumes {
		if v.Pool == pool {
			l.Items = append(l.Items, *v)
		}
	}
	return l, nil
}

func (f *fakeManager) GetVolume(_ context.Context, pool, name string) (*managerapi.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets = append(f.gets, pool+"/"+name)
	v, ok := f.volumes[pool+"/"+name]
	if !ok {
		return nil, answer(managerapi.ReasonNotFound)
	}
	c := *v
	return &c, nil
}

func (f *fakeManager) CreateVolume(_ context.Context, pool, name string, req managerapi.CreateVolumeRequest) (*managerapi.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, pool+"/"+name+" "+req.Mode+" "+resource.NewQuantity(req.RequiredBytes, resource.BinarySI).String()+" by "+req.Owner)
	f.lastCreate = req
	if f.err != nil {
		return nil, f.err
	}
	if owner, ok := f.owner(pool, name); ok && owner != req.Owner {
		return nil, ownerConflict(owner)
	}
	if _, ok := f.owner(pool, name); !ok {
		f.haveIn(pool, name, req.Owner, req.ClaimNamespace)
		f.volumes[pool+"/"+name].Multihost = req.Multihost
	}
	c := *f.volumes[pool+"/"+name]
	c.Mode = req.Mode
	return &c, nil
}

func (f *fakeManager) CloneVolume(_ context.Context, pool, name string, req managerapi.CloneVolumeRequest) (*managerapi.Clone, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clones = append(f.clones, pool+"/"+name+" from "+req.SourcePool+"/"+req.SourceName+" of "+req.SourceOwner+" "+resource.NewQuantity(req.RequiredBytes, resource.BinarySI).String()+" by "+req.Owner)
	if f.err != nil {
		return nil, f.err
	}
	if owner, ok := f.owner(pool, name); ok && owner != req.Owner {
		return nil, ownerConflict(owner)
	}
	cl := &managerapi.Clone{Source: req.SourcePool + "/" + req.SourceName, State: managerapi.CloneCopying, Method: managerapi.CloneMethodCopy, TotalBytes: 100}
	if f.copying > 0 {
		f.copying--
		cl.CopiedBytes = int64(100 / (f.copying + 1))
		return cl, nil
	}
	if _, ok := f.owner(pool, name); !ok {
		f.haveIn(pool, name, req.Owner, req.ClaimNamespace)
		f.volumes[pool+"/"+name].Multihost = req.Multihost
	}
	v := *f.volumes[pool+"/"+name]
	cl.State, cl.CopiedBytes, cl.Volume = managerapi.CloneDone, 100, &v
	return cl, nil
}

func (f *fakeManager) SetOwner(_ context.Context, pool, name string, req managerapi.SetOwnerRequest) (*managerapi.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change := pool + "/" + name + " " + req.Previous + "->" + req.Owner
	if req.Multihost {
		change += " multihost"
	}
	f.setOwners = append(f.setOwners, change)
	if f.setOwnerErr != nil {
		return nil, f.setOwnerErr
	}
	owner, ok := f.owner(pool, name)
	switch {
	case !ok:
		return nil, answer(managerapi.ReasonNotFound)
	case owner != req.Previous:
		return nil, ownerConflict(owner)
	}
	v := f.volumes[pool+"/"+name]
	if v.Owner != req.Owner {
		v.ClaimNamespace = "" // the previous owner's claim's
	}
	if req.ClaimNamespace != "" {
		v.ClaimNamespace = req.ClaimNamespace
	}
	v.Owner, v.Multihost = req.Owner, v.Multihost || req.Multihost
	c := *v
	return &c, nil
}

func (f *fakeManager) DeleteVolume(_ context.Context, pool, name string, opts managerapi.DeleteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, pool+"/"+name+" by "+opts.Owner)
	if f.err != nil {
		return f.err
	}
	owner, ok := f.owner(pool, name)
	switch {
	case !ok:
		return nil
	case owner != opts.Owner:
		return ownerConflict(owner)
	}
	delete(f.volumes, pool+"/"+name)
	return nil
}

// fixture is a Provisioner and its ClaimSync on selfNode over fake caches.
type fixture struct {
	prov     *Provisioner
	sync     *ClaimSync
	claims   cache.Indexer
	kube     *fake.Clientset
	recorder *record.FakeRecorder
	manager  *fakeManager
}

// newFixture puts the objects in the informer caches; PVs and claims also on
// the fake API server.
func newFixture(t *testing.T, inst fakeInstances, objects ...any) *fixture {
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
	f := &fixture{kube: kube, claims: claims.Informer().GetIndexer(), recorder: record.NewFakeRecorder(100), manager: &fakeManager{}}
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

func class(name string, binding storagev1.VolumeBindingMode, params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       testProvisioner,
		Parameters:        params,
		VolumeBindingMode: ptr.To(binding),
	}
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
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "data", UID: types.UID("0000-uid"), ResourceVersion: "7",
			Annotations: map[string]string{},
		},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(className),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceStorage: resource.MustParse("1Gi"),
			}},
		},
	}
	for _, kv := range keyValues {
		k, v, _ := strings.Cut(kv, "=")
		c.Annotations[k] = v
	}
	return c
}

// volume returns a node-mode PV of this provisioner named name whose
// annotations name dir of pool on nodeName, made for claim ns/claimName.
func volume(name, nodeName, pool, dir, claimName string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		storagehelpers.AnnDynamicallyProvisioned: testProvisioner, hostpathv1.AnnotationNode: nodeName, hostpathv1.AnnotationPool: pool, hostpathv1.AnnotationDirectory: dir,
		hostpathv1.AnnotationClaimNamespace: "team-a", hostpathv1.AnnotationClaimName: claimName, hostpathv1.AnnotationMode: hostpathv1.ModeNode, hostpathv1.AnnotationSizeEnforcement: hostpathv1.EnforcementNone,
	}}}
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
