package usage

import (
	"context"
	"encoding/json"
	"fmt"
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

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
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

// newManager returns the managers of the tests, selfNode's set as set
// sets it.
func newManager(volumes map[string][]managerapi.Volume, listErrs map[string]error, readOnly map[string]bool, hostErr error) *managertest.Fake {
	f := managertest.New()
	set(f, volumes, listErrs, readOnly, hostErr)
	return f
}

// set makes selfNode's manager hold testPool and the pools of volumes
// (under /var/hp, read-only where readOnly says) with those volumes only,
// and answer listErrs to the listings of pools and hostErr to Host.
func set(f *managertest.Fake, volumes map[string][]managerapi.Volume, listErrs map[string]error, readOnly map[string]bool, hostErr error) {
	m := f.Node(selfNode)
	for _, p := range m.Pools() {
		m.RemovePool(p.Name)
	}
	f.ClearFailures()
	m.AddPool(managerapi.Pool{Name: testPool, Path: "/var/hp/" + testPool, ReadOnly: readOnly[testPool]})
	for pool, vols := range volumes {
		m.AddPool(managerapi.Pool{Name: pool, Path: "/var/hp/" + pool, ReadOnly: readOnly[pool]})
		for _, v := range vols {
			v.Pool = pool
			m.AddVolume(v)
		}
	}
	for pool, err := range listErrs {
		if err != nil {
			f.Fail(managertest.Failure{Method: managertest.ListVolumes, Pool: pool, Err: err})
		}
	}
	if hostErr != nil {
		f.Fail(managertest.Failure{Method: managertest.Host, Err: hostErr})
	}
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

// newPV returns a Bound node-mode PV of this provisioner on selfNode in
// testPool of size enforcement xfs, directory name+"-dir", bound to the
// claim testNamespace/name+"-claim", changed by mods.
func newPV(name string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	claim := name + "-claim"
	return hostpathtest.NodePV(name, selfNode, append([]func(*v1.PersistentVolume){hostpathtest.ResourceVersion("7"),
		hostpathtest.Annotation(hostpathv1.AnnotationSizeEnforcement, managerapi.EnforcementXFS), hostpathtest.MadeFor(testNamespace, claim),
		hostpathtest.ClaimRef(testNamespace, claim), hostpathtest.ReclaimPolicy(v1.PersistentVolumeReclaimDelete), hostpathtest.Phase(v1.VolumeBound)}, mods...)...)
}

// fixture is a Refresher on selfNode over a fake PV cache and a fake API
// server holding the same PVs.
type fixture struct {
	refresher *Refresher
	kube      *fake.Clientset
	indexer   cache.Indexer
	manager   *managertest.Fake
	events    *eventLog
	metrics   *Metrics
}

// newFixture puts the PVs in the clientset and in the PV cache; Managers
// answers mgr for selfNode, or managersErr. The Refresher warns from
// DefaultWarningThreshold, records its events in f.events and its series
// in f.metrics; mods change its Config.
func newFixture(t *testing.T, mgr *managertest.Fake, managersErr error, clk clock.Clock, cached []*v1.PersistentVolume, mods ...func(*Config)) *fixture {
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
			return mgr.Node(node), nil
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
	hostpathtest.Replace(t, f.indexer, list)
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
	for _, a := range hostpathtest.Writes(kube.Actions()) {
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
