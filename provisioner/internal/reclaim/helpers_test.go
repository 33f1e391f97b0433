package reclaim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/api/runtime/worker/workertest"
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
	got := workertest.Queued(f.ctrl.queue)
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

// newManagers returns the tests' managers (managertest): one on each of
// nodes, each holding the directory of every PV of pvs, owned by the PV,
// as a manager holds the directory it made for it.
func newManagers(pvs []*v1.PersistentVolume, nodes ...string) *managertest.Fake {
	mgrs := managertest.New()
	for _, n := range nodes {
		m := mgrs.Node(n)
		for _, pv := range pvs {
			if loc, ok := locationOf(pv, testNames); ok && loc.Pool != "" && loc.Directory != "" {
				m.AddVolume(managerapi.Volume{Pool: loc.Pool, Name: loc.Directory, Owner: pv.Name})
			}
		}
	}
	return mgrs
}

// failOn makes every call of method on node ("": on every node) answer
// err; a nil err changes nothing.
func failOn(mgrs *managertest.Fake, node string, method managertest.Method, err error) {
	if err != nil {
		mgrs.Fail(managertest.Failure{Node: node, Method: method, Err: err})
	}
}

// described returns calls in the forms the tests compare: "host", "list
// <pool>", "delete <pool>/<name> owner=<owner> ifEmpty=<bool>" and
// "setOwner <pool>/<name> owner=<owner> previous=<previous>
// retained=<bool> policy=<policy>".
func described(calls []managertest.Call) []string {
	var out []string
	for _, c := range calls {
		switch r := c.Request.(type) {
		case managerapi.DeleteOptions:
			out = append(out, fmt.Sprintf("delete %s/%s owner=%s ifEmpty=%t", c.Pool, c.Name, r.Owner, r.IfEmpty))
		case managerapi.SetOwnerRequest:
			out = append(out, fmt.Sprintf("setOwner %s/%s owner=%s previous=%s retained=%t policy=%s", c.Pool, c.Name, r.Owner, r.Previous, r.Retained, r.ReclaimPolicy))
		default:
			switch c.Method {
			case managertest.Host:
				out = append(out, "host")
			case managertest.ListVolumes:
				out = append(out, "list "+c.Pool)
			default:
				out = append(out, c.String())
			}
		}
	}
	return out
}

// newPV returns a PV of this provisioner on selfNode, policy Delete (and
// recorded so), resourceVersion 7, Released and under deletion, with
// otherFinalizer and hostpathv1.FinalizerDirectoryProtection, changed by
// mods (hostpathtest's, and withPolicy, notDeleting).
func newPV(name string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	return hostpathtest.NodePV(name, selfNode, append([]func(*v1.PersistentVolume){
		hostpathtest.ProvisionedBy(testProvisioner), hostpathtest.ResourceVersion("7"), hostpathtest.Phase(v1.VolumeReleased),
		withPolicy(v1.PersistentVolumeReclaimDelete), hostpathtest.Deleting,
		hostpathtest.Finalizers(otherFinalizer, hostpathv1.FinalizerDirectoryProtection),
	}, mods...)...)
}

// withPolicy sets the PV's reclaim policy, recorded with its directory.
func withPolicy(p v1.PersistentVolumeReclaimPolicy) func(*v1.PersistentVolume) {
	return func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = p
		pv.Annotations[hostpathv1.AnnotationRecordedPolicy] = hostpathv1.RecordedReclaimPolicy(pv)
	}
}

// notDeleting makes the PV one not under deletion.
func notDeleting(pv *v1.PersistentVolume) { pv.DeletionTimestamp = nil }

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
