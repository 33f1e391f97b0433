package reclaim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

const (
	testProvisioner  = "hostpath.dev/provisioner"
	testFieldManager = "hostpath-provisioner"
	selfNode         = "node-a"
	otherNode        = "node-b"
	goneNode         = "node-gone"
	testPool         = "default"
	otherFinalizer   = "example.com/keep"
)

// testNames are the provisioner names of the tests' instance.
var testNames = hostpathv1.NewProvisionerNames(testProvisioner)

// queued takes every PV name out of the controller's queue, sorted.
func (f *controllerFixture) queued() []string {
	var got []string
	for f.ctrl.queue.Len() > 0 {
		name, _ := f.ctrl.queue.Get()
		got = append(got, name)
		f.ctrl.queue.Done(name)
	}
	slices.Sort(got)
	return got
}

// fakeNodes answers for Config.Nodes as nodes.Lookup does: a Node it
// keeps as existing (exist) exists; of another it asks the API server
// (api, nil: every Node is missing) and keeps the answer, but a Node kept
// as missing is asked about again; Forget drops an answer, and is
// recorded.
type fakeNodes struct {
	mu        sync.Mutex
	api       kubernetes.Interface
	exist     map[string]bool
	forgotten []string
}

// newFakeNodes keeps that the nodes named exist.
func newFakeNodes(api kubernetes.Interface, names ...string) *fakeNodes {
	f := &fakeNodes{api: api, exist: map[string]bool{}}
	for _, n := range names {
		f.exist[n] = true
	}
	return f
}

func (f *fakeNodes) Exists(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exist[name] || f.api == nil {
		return f.exist[name], nil
	}
	_, err := f.api.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	f.exist[name] = err == nil
	return err == nil, nil
}

func (f *fakeNodes) Forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.exist, name)
	f.forgotten = append(f.forgotten, name)
}

// fakeManager records calls and answers with the configured errors.
type fakeManager struct {
	mu    sync.Mutex
	calls []string

	deleteErr   error
	setOwnerErr error
	// deleteErrs answers DeleteVolume per "pool/name" (over deleteErr).
	deleteErrs map[string]error
	// volumes are the pools and their volumes; listErrs fails ListVolumes
	// per pool.
	volumes  map[string][]managerapi.Volume
	listErrs map[string]error
}

func (f *fakeManager) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeManager) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeManager) Host(context.Context) (*managerapi.Host, error) {
	f.record("host")
	h := &managerapi.Host{NodeName: selfNode}
	for pool := range f.volumes {
		h.Pools = append(h.Pools, managerapi.Pool{Name: pool})
	}
	slices.SortFunc(h.Pools, func(a, b managerapi.Pool) int { return strings.Compare(a.Name, b.Name) })
	return h, nil
}

func (f *fakeManager) ListVolumes(_ context.Context, pool string) (*managerapi.VolumeList, error) {
	f.record("list %s", pool)
	if err := f.listErrs[pool]; err != nil {
		return nil, err
	}
	return &managerapi.VolumeList{Items: f.volumes[pool]}, nil
}

func (f *fakeManager) DeleteVolume(_ context.Context, pool, name string, opts managerapi.DeleteOptions) error {
	f.record("delete %s/%s owner=%s ifEmpty=%t", pool, name, opts.Owner, opts.IfEmpty)
	if err, ok := f.deleteErrs[pool+"/"+name]; ok {
		return err
	}
	return f.deleteErr
}

func (f *fakeManager) SetOwner(_ context.Context, pool, name string, req managerapi.SetOwnerRequest) (*managerapi.Volume, error) {
	f.record("setOwner %s/%s owner=%s previous=%s retained=%t policy=%s", pool, name, req.Owner, req.Previous, req.Retained, req.ReclaimPolicy)
	if f.setOwnerErr != nil {
		return nil, f.setOwnerErr
	}
	return &managerapi.Volume{Name: name, Pool: pool, Owner: req.Owner, Retained: req.Retained}, nil
}

// managerError is an answer of the manager, wrapped like the client does.
func managerError(reason managerapi.Reason, owner string) error {
	e := managerapi.Errorf(reason, "test answer")
	e.Owner = owner
	return fmt.Errorf("DELETE /v1/pools/default/volumes/x: %w", e)
}

// newPV returns a PV of this provisioner on selfNode, policy Delete,
// Released and under deletion, with otherFinalizer and
// hostpathv1.FinalizerDirectoryProtection, changed by mods.
func newPV(name string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	now := metav1.Now()
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			UID:               types.UID("uid-" + name),
			ResourceVersion:   "7",
			DeletionTimestamp: &now,
			Finalizers:        []string{otherFinalizer, hostpathv1.FinalizerDirectoryProtection},
			Annotations: map[string]string{
				storagehelpers.AnnDynamicallyProvisioned: testProvisioner,
				hostpathv1.AnnotationNode:                selfNode,
				hostpathv1.AnnotationPool:                testPool,
				hostpathv1.AnnotationDirectory:           name + "-dir",
				hostpathv1.AnnotationMode:                "node",
				hostpathv1.AnnotationRecordedPolicy:      "Delete",
			},
		},
		Spec:   v1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased},
	}
	for _, m := range mods {
		m(pv)
	}
	return pv
}

func onNode(node string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Annotations[hostpathv1.AnnotationNode] = node }
}

func withPolicy(p v1.PersistentVolumeReclaimPolicy) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = p
		pv.Annotations[hostpathv1.AnnotationRecordedPolicy] = hostpathv1.RecordedReclaimPolicy(pv)
	}
}

func withPhase(p v1.PersistentVolumePhase) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Status.Phase = p }
}

func withAnnotation(key, value string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Annotations[key] = value }
}

func withFinalizers(f ...string) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) { pv.Finalizers = f }
}

func notDeleting(pv *v1.PersistentVolume) { pv.DeletionTimestamp = nil }

func newNode(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
}

// writes returns the actions of kube that are not reads.
func writes(kube *fake.Clientset) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range kube.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a)
		}
	}
	return out
}

// events drains the recorder.
func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// checkEvents checks that got has one event per want, each starting with it.
func checkEvents(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %d starting with %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}

// logContext returns a test context whose logger keeps what is logged,
// and a function that returns, as "reason message", every Info line
// logged with a reason (report's, for an outcome without an event).
func logContext(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	u, ok := logger.GetSink().(ktesting.Underlier)
	if !ok {
		t.Fatal("the test logger keeps no buffer")
	}
	return ctx, func() []string {
		var out []string
		for _, e := range u.GetBuffer().Data() {
			var reason, message any
			for i := 0; i+1 < len(e.ParameterKVList); i += 2 {
				switch e.ParameterKVList[i] {
				case "reason":
					reason = e.ParameterKVList[i+1]
				case "message":
					message = e.ParameterKVList[i+1]
				}
			}
			if e.Type == ktesting.LogInfo && reason != nil {
				out = append(out, fmt.Sprintf("%v %v", reason, message))
			}
		}
		return out
	}
}

// checkLogged checks that got has one line per want, each starting with it.
func checkLogged(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("logged outcomes = %q, want %d starting with %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("logged outcome %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}
