package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/hostdefiner/pkg/apis/hostpath.dev/v1"
	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/provisioner/internal/annotations"
)

const (
	testProvisioner  = "hostpath.dev/provisioner"
	testFieldManager = "hostpath-provisioner"
	selfNode         = "node-a"
	otherNode        = "node-b"
	testPool         = "default"
	testInterval     = time.Minute
	mi               = int64(1) << 20
)

// testNames are the provisioner names of the tests' instance.
var testNames = hostpathv1.NewProvisionerNames(testProvisioner)

// fakeManager answers ListVolumes from volumes (per pool) or listErrs, and
// records the calls.
type fakeManager struct {
	mu       sync.Mutex
	calls    []string
	volumes  map[string][]client.Volume
	listErrs map[string]error
}

func (f *fakeManager) ListVolumes(_ context.Context, pool string) (*client.VolumeList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "list "+pool)
	if err := f.listErrs[pool]; err != nil {
		return nil, err
	}
	return &client.VolumeList{Items: slices.Clone(f.volumes[pool])}, nil
}

// Calls returns the calls so far.
func (f *fakeManager) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// setVolumes replaces the volumes of pool.
func (f *fakeManager) setVolumes(pool string, vols ...client.Volume) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.volumes == nil {
		f.volumes = map[string][]client.Volume{}
	}
	f.volumes[pool] = vols
}

// enforced is a volume of an XFS pool that uses used bytes.
func enforced(name string, used int64) client.Volume {
	return client.Volume{Name: name, SizeBytes: 100 * mi, Enforcement: client.EnforcementXFS, UsedBytes: ptr.To(used)}
}

// unenforced is a volume of a pool that does not enforce sizes: no usage.
func unenforced(name string) client.Volume {
	return client.Volume{Name: name, SizeBytes: 100 * mi}
}

// newPV returns a bound node-mode PV of this provisioner on selfNode in
// testPool, directory name+"-dir", changed by mods.
func newPV(name string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			UID:             types.UID("uid-" + name),
			ResourceVersion: "7",
			Annotations: map[string]string{
				annotations.ProvisionedBy:   testProvisioner,
				annotations.Node:            selfNode,
				annotations.Pool:            testPool,
				annotations.Directory:       name + "-dir",
				annotations.Mode:            annotations.ModeNode,
				annotations.SizeEnforcement: client.EnforcementXFS,
			},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeBound},
	}
	for _, m := range mods {
		m(pv)
	}
	return pv
}

func withAnnotation(key, value string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Annotations[key] = value }
}

func withoutAnnotation(key string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { delete(pv.Annotations, key) }
}

func deleting(pv *v1.PersistentVolume) {
	now := metav1.Now()
	pv.DeletionTimestamp = &now
	pv.Finalizers = []string{annotations.Finalizer}
}

// fixture is a Refresher on selfNode over a fake PV cache and a fake API
// server holding the same PVs.
type fixture struct {
	refresher *Refresher
	kube      *fake.Clientset
	indexer   cache.Indexer
	manager   *fakeManager
}

// newFixture puts the PVs in the clientset and in the PV cache; Managers
// answers mgr for selfNode, or managersErr.
func newFixture(t *testing.T, mgr *fakeManager, managersErr error, clk clock.Clock, cached []*v1.PersistentVolume) *fixture {
	t.Helper()
	var objects []runtime.Object
	for _, pv := range cached {
		objects = append(objects, pv)
	}
	kube := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	volumes := factory.Core().V1().PersistentVolumes()
	for _, pv := range cached {
		if err := volumes.Informer().GetIndexer().Add(pv); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{kube: kube, indexer: volumes.Informer().GetIndexer(), manager: mgr}
	f.refresher = New(Config{
		ProvisionerNames: testNames,
		Node:             selfNode,
		FieldManager:     testFieldManager,
		Client:           kube,
		Volumes:          volumes.Lister(),
		Synced:           []cache.InformerSynced{func() bool { return true }},
		Managers: func(node string) (Manager, error) {
			if node != selfNode {
				t.Errorf("Managers(%q), want only %q", node, selfNode)
			}
			if managersErr != nil {
				return nil, managersErr
			}
			return mgr, nil
		},
		Interval: testInterval,
		Clock:    clk,
	})
	return f
}

// writes returns the PV patches sent to the API server as "pv=value" (the
// value of annotations.SizeUsed in the patch), checking that each is a
// merge patch of that one annotation with the field manager, and that
// nothing else was written.
func writes(t *testing.T, kube *fake.Clientset) []string {
	t.Helper()
	var out []string
	for _, a := range kube.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		p, ok := a.(k8stesting.PatchActionImpl)
		if !ok || a.GetResource().Resource != "persistentvolumes" {
			t.Errorf("unexpected write %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		if p.GetPatchType() != types.MergePatchType || p.PatchOptions.FieldManager != testFieldManager {
			t.Errorf("patch of %s: type %s, field manager %q; want %s, %q", p.GetName(), p.GetPatchType(), p.PatchOptions.FieldManager, types.MergePatchType, testFieldManager)
		}
		out = append(out, fmt.Sprintf("%s=%s", p.GetName(), patchedValue(t, p.GetPatch())))
	}
	return out
}

// patchedValue reads the value of annotations.SizeUsed out of a merge patch
// that must set that annotation only.
func patchedValue(t *testing.T, patch []byte) string {
	t.Helper()
	var body struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &body); err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	var all map[string]any
	if err := json.Unmarshal(patch, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || len(body.Metadata.Annotations) != 1 {
		t.Errorf("patch %s, want the annotation %s only", patch, annotations.SizeUsed)
	}
	v, ok := body.Metadata.Annotations[annotations.SizeUsed]
	if !ok {
		t.Errorf("patch %s does not set %s", patch, annotations.SizeUsed)
	}
	return v
}
