package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

const (
	testProvisioner  = "hostpath.dev/provisioner"
	testFieldManager = "hostpath-provisioner"
	selfNode         = "node-a"
	otherNode        = "node-b"
	testPool         = "default"
	testNamespace    = "team-a"
	testInterval     = time.Minute
	mi               = int64(1) << 20
)

// testNames are the provisioner names of the tests' instance.
var testNames = hostpathv1.NewProvisionerNames(testProvisioner)

// fakeManager answers Host from readOnly (pools listed by the host, all
// of testPool and the pools of volumes) or hostErr, and ListVolumes from
// volumes (per pool) or listErrs, and records the calls.
type fakeManager struct {
	mu       sync.Mutex
	calls    []string
	volumes  map[string][]managerapi.Volume
	listErrs map[string]error
	readOnly map[string]bool
	hostErr  error
}

func (f *fakeManager) Host(context.Context) (*managerapi.Host, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "host")
	if f.hostErr != nil {
		return nil, f.hostErr
	}
	names := map[string]bool{testPool: true}
	for p := range f.volumes {
		names[p] = true
	}
	h := &managerapi.Host{NodeName: selfNode}
	for _, p := range slices.Sorted(maps.Keys(names)) {
		h.Pools = append(h.Pools, managerapi.Pool{Name: p, Path: "/var/hp/" + p, ReadOnly: f.readOnly[p]})
	}
	return h, nil
}

func (f *fakeManager) ListVolumes(_ context.Context, pool string) (*managerapi.VolumeList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "list "+pool)
	if err := f.listErrs[pool]; err != nil {
		return nil, err
	}
	vols := slices.Clone(f.volumes[pool])
	for i := range vols {
		vols[i].Pool, vols[i].Path = pool, "/var/hp/"+pool+"/"+vols[i].Name
	}
	return &managerapi.VolumeList{Items: vols}, nil
}

// Calls returns the calls so far.
func (f *fakeManager) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// setVolumes replaces the volumes of pool.
func (f *fakeManager) setVolumes(pool string, vols ...managerapi.Volume) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.volumes == nil {
		f.volumes = map[string][]managerapi.Volume{}
	}
	f.volumes[pool] = vols
}

// set replaces, under the lock, what the manager answers.
func (f *fakeManager) set(volumes map[string][]managerapi.Volume, listErrs map[string]error, readOnly map[string]bool, hostErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.volumes, f.listErrs, f.readOnly, f.hostErr = volumes, listErrs, readOnly, hostErr
}

// enforced is a volume of an XFS pool of 4 GiB that uses used bytes.
func enforced(name string, used int64) managerapi.Volume {
	return sizedVolume(name, 4096*mi, used)
}

// sizedVolume is a volume of an XFS pool of size bytes that uses used
// bytes.
func sizedVolume(name string, size, used int64) managerapi.Volume {
	return managerapi.Volume{Name: name, SizeBytes: size, Enforcement: managerapi.EnforcementXFS, UsedBytes: ptr.To(used)}
}

// unenforced is a volume of a pool that does not enforce sizes: no usage.
func unenforced(name string) managerapi.Volume {
	return managerapi.Volume{Name: name, SizeBytes: 100 * mi}
}

// newPV returns a node-mode PV of this provisioner on selfNode in
// testPool, directory name+"-dir", bound to the claim testNamespace/
// name+"-claim", changed by mods.
func newPV(name string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			UID:             types.UID("uid-" + name),
			ResourceVersion: "7",
			Annotations: map[string]string{
				storagehelpers.AnnDynamicallyProvisioned: testProvisioner,
				hostpathv1.AnnotationNode:                selfNode,
				hostpathv1.AnnotationPool:                testPool,
				hostpathv1.AnnotationDirectory:           name + "-dir",
				hostpathv1.AnnotationMode:                hostpathv1.ModeNode,
				hostpathv1.AnnotationSizeEnforcement:     managerapi.EnforcementXFS,
				hostpathv1.AnnotationClaimNamespace:      testNamespace,
				hostpathv1.AnnotationClaimName:           name + "-claim",
			},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: testNamespace, Name: name + "-claim", UID: types.UID("uid-" + name + "-claim")},
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

// multihostOn makes a PV multihost, held by nodes.
func multihostOn(nodes ...string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeMultihost
		pv.Annotations[hostpathv1.AnnotationNodes] = hostpathv1.JoinNodes(nodes)
		delete(pv.Annotations, hostpathv1.AnnotationNode)
	}
}

// inPhase sets the PV's phase and reclaim policy.
func inPhase(phase v1.PersistentVolumePhase, policy v1.PersistentVolumeReclaimPolicy) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Status.Phase, pv.Spec.PersistentVolumeReclaimPolicy = phase, policy
	}
}

func deleting(pv *v1.PersistentVolume) {
	now := metav1.Now()
	pv.DeletionTimestamp = &now
	pv.Finalizers = []string{hostpathv1.FinalizerDirectoryProtection}
}

// fixture is a Refresher on selfNode over a fake PV cache and a fake API
// server holding the same PVs.
type fixture struct {
	refresher *Refresher
	kube      *fake.Clientset
	indexer   cache.Indexer
	manager   *fakeManager
	events    *eventLog
	metrics   *Metrics
}

// newFixture puts the PVs in the clientset and in the PV cache; Managers
// answers mgr for selfNode, or managersErr. The Refresher warns from
// DefaultWarningThreshold, records its events in f.events and its series
// in f.metrics; mods change its Config.
func newFixture(t *testing.T, mgr *fakeManager, managersErr error, clk clock.Clock, cached []*v1.PersistentVolume, mods ...func(*Config)) *fixture {
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
	f := &fixture{kube: kube, indexer: volumes.Informer().GetIndexer(), manager: mgr, events: &eventLog{}, metrics: NewMetrics()}
	cfg := Config{
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
		Interval:         testInterval,
		WarningThreshold: DefaultWarningThreshold,
		Recorder:         f.events,
		Metrics:          f.metrics,
		Clock:            clk,
	}
	for _, m := range mods {
		m(&cfg)
	}
	f.refresher = New(cfg)
	return f
}

// syncCache puts the API server's PVs into the cache, as the informer
// would between two refreshes, and drops those it no longer has.
func (f *fixture) syncCache(t *testing.T) {
	t.Helper()
	list, err := f.kube.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]any, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	if err := f.indexer.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}

// pv returns the PV name as the API server has it.
func (f *fixture) pv(t *testing.T, name string) *v1.PersistentVolume {
	t.Helper()
	pv, err := f.kube.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// eventLog is an event recorder that keeps, for each event, who it is
// about ("pv/NAME", "pvc/NAMESPACE/NAME"), its type, reason and message.
type eventLog struct {
	mu     sync.Mutex
	events []recorded
}

// recorded is one event of an eventLog.
type recorded struct {
	object, eventType, reason, message string
}

// String is the event without its message: "pv/pv-a Warning VolumeUsageHigh".
func (e recorded) String() string { return e.object + " " + e.eventType + " " + e.reason }

func (l *eventLog) Event(obj runtime.Object, eventType, reason, message string) {
	var who string
	switch o := obj.(type) {
	case *v1.PersistentVolume:
		who = "pv/" + o.Name
	case *v1.ObjectReference:
		if o.Kind != "PersistentVolumeClaim" || o.APIVersion != "v1" || o.UID == "" {
			who = "unexpected reference " + o.String()
		} else {
			who = "pvc/" + o.Namespace + "/" + o.Name
		}
	default:
		who = fmt.Sprintf("unexpected %T", obj)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recorded{object: who, eventType: eventType, reason: reason, message: message})
}

func (l *eventLog) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	l.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	l.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

// take returns the events since the last take.
func (l *eventLog) take() []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// names returns the String of each event.
func names(events []recorded) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.String()
	}
	return out
}

// writes returns the PV patches sent to the API server, one string each:
// the PV's name, "=value" when the patch sets hostpathv1.AnnotationSizeUsed, and
// " health=value" when it sets hostpathv1.AnnotationHealth (" health-" when it
// removes it). It checks that each is a merge patch with the field manager
// of those two annotations only (and a resourceVersion), and that nothing
// else was written.
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
		out = append(out, p.GetName()+describePatch(t, p.GetPatch()))
	}
	return out
}

// patchBody is the shape of the Refresher's patches.
type patchBody struct {
	Metadata struct {
		ResourceVersion string             `json:"resourceVersion"`
		Annotations     map[string]*string `json:"annotations"`
	} `json:"metadata"`
}

// readPatch reads a patch of the Refresher, checking that it touches the
// two annotations and the resourceVersion only.
func readPatch(t *testing.T, patch []byte) patchBody {
	t.Helper()
	var body patchBody
	if err := json.Unmarshal(patch, &body); err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	var top map[string]map[string]json.RawMessage
	if err := json.Unmarshal(patch, &top); err != nil {
		t.Fatal(err)
	}
	if _, hasRV := top["metadata"]["resourceVersion"]; len(top) != 1 || len(top["metadata"]) > 2 || len(top["metadata"]) == 2 && !hasRV {
		t.Errorf("patch %s, want metadata.annotations (and resourceVersion) only", patch)
	}
	for k := range body.Metadata.Annotations {
		if k != hostpathv1.AnnotationSizeUsed && k != hostpathv1.AnnotationHealth {
			t.Errorf("patch %s sets %s, want %s and %s only", patch, k, hostpathv1.AnnotationSizeUsed, hostpathv1.AnnotationHealth)
		}
	}
	if len(body.Metadata.Annotations) == 0 {
		t.Errorf("patch %s sets no annotation", patch)
	}
	return body
}

// describePatch writes a patch as writes does, without the PV's name.
func describePatch(t *testing.T, patch []byte) string {
	t.Helper()
	a := readPatch(t, patch).Metadata.Annotations
	s := ""
	if v, ok := a[hostpathv1.AnnotationSizeUsed]; ok {
		if v == nil {
			t.Errorf("patch %s removes %s", patch, hostpathv1.AnnotationSizeUsed)
		} else {
			s += "=" + *v
		}
	}
	if v, ok := a[hostpathv1.AnnotationHealth]; ok {
		if v == nil {
			s += " health-"
		} else {
			s += " health=" + *v
		}
	}
	return s
}

// patchedValue reads the value of hostpathv1.AnnotationSizeUsed out of a patch that
// must set it.
func patchedValue(t *testing.T, patch []byte) string {
	t.Helper()
	v := readPatch(t, patch).Metadata.Annotations[hostpathv1.AnnotationSizeUsed]
	if v == nil {
		t.Errorf("patch %s does not set %s", patch, hostpathv1.AnnotationSizeUsed)
		return ""
	}
	return *v
}
