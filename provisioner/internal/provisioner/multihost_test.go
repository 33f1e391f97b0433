package provisioner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/managers/managerstest"
	"hostpath.dev/provisioner/internal/podstub"
	"hostpath.dev/provisioner/internal/responsibility"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// fakeTargets are the fixed targets of pool "default", as the
// HostDefinitions would make them (managerstest.Targets), and the nodes
// whose manager serves.
type fakeTargets struct {
	ready, pending []string
	// serving are the other nodes whose manager can be called (a
	// definition PendingForCreation, in Error or missing, say).
	serving []string
}

// multihostFixture is a fixture whose Provisioner calls one fake manager
// per node whose manager serves (targets.ready and targets.serving), with
// one attempt per node (no backoff to wait for).
func multihostFixture(t *testing.T, targets fakeTargets, objects ...any) (*fixture, *managertest.Fake) {
	t.Helper()
	f := newFixture(t, responsibilitytest.Instances{Wins: true}, append(testNodes(), objects...)...)
	mgrs := newManagers(slices.Concat(targets.ready, targets.serving)...)
	f.prov.cfg.Managers = managertest.For[VolumeManager](mgrs)
	f.prov.cfg.Targets = managerstest.Targets{Pool: "default", Ready: targets.ready, Pending: targets.pending}
	f.prov.cfg.Recorder = f.recorder
	f.prov.cfg.CreateFanout = fanout.Options{Attempts: 1}
	return f, mgrs
}

// wantMultihostPV is the PV expected for claim ns/data of class with the
// directory dir on nodes, pending ones aside.
func wantMultihostPV(class *storagev1.StorageClass, c *v1.PersistentVolumeClaim, dir, nodes, pending string) *v1.PersistentVolume {
	pv := wantPV(class, c, dir)
	pv.Spec.NodeAffinity = nil
	delete(pv.Annotations, hostpathv1.AnnotationNode)
	pv.Labels[hostpathv1.LabelNode] = hostpathv1.NodeLabelMultihost
	pv.Annotations[hostpathv1.AnnotationMode] = "multihost"
	pv.Annotations["hostpath.dev/nodes"] = nodes
	if pending != "" {
		pv.Annotations["hostpath.dev/pending-nodes"] = pending
	}
	return pv
}

func TestProvisionMultihost(t *testing.T) {
	shared := class("shared", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost", ParamPathPattern: mhPattern})
	shared.ReclaimPolicy = ptr.To(v1.PersistentVolumeReclaimRetain)
	wffc := class("shared-wffc", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{hostpathv1.ParamMode: "multihost", ParamPathPattern: mhPattern})
	rwx := func(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
		return withAccessModes(c, v1.ReadWriteMany)
	}
	fast := class("fast", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost", hostpathv1.ParamPool: "fast", ParamPathPattern: mhPattern})
	all := fakeTargets{ready: []string{selfNode, otherNode, idleNode}}
	unavailable := fmt.Errorf("PUT: %w", &managerapi.Error{StatusCode: 503, Status: managerapi.Status{Reason: managerapi.ReasonInternal, Message: "disk on fire"}})
	tests := []struct {
		name       string
		class      *storagev1.StorageClass
		claim      *v1.PersistentVolumeClaim
		targets    fakeTargets
		setup      func(*managertest.Fake)
		wantState  controller.ProvisioningState
		wantErr    string
		wantPV     *v1.PersistentVolume
		wantCreate []string // nodes that got a create
	}{
		{
			name: "every node ready", class: shared, claim: rwx(claim("shared")), targets: all,
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantPV: wantMultihostPV(shared, rwx(claim("shared")), mhDir, "node-a,node-b,node-c", ""),
		},
		{
			name: "a pending node is recorded, not called", class: shared, claim: claim("shared"),
			targets:   fakeTargets{ready: []string{selfNode, otherNode}, pending: []string{idleNode}, serving: []string{idleNode}},
			wantState: controller.ProvisioningFinished, wantCreate: []string{selfNode, otherNode},
			wantPV: wantMultihostPV(shared, claim("shared"), mhDir, "node-a,node-b", "node-c"),
		},
		{
			name: "the targets are those of the class's pool", class: fast, claim: claim("fast"), targets: all,
			wantState: controller.ProvisioningInBackground,
			wantErr:   `create directory "data-pvc-0000-uid" in pool "fast": no node has a Ready or defining (PendingForCreation) HostDefinition of pool "fast": the host definer defines the pool on the nodes that run a manager (see kubectl get hostdefinitions); will retry`,
		},
		{
			name: "the scheduler's selected node does not restrict the volume", class: wffc,
			claim: claim("shared-wffc", storagehelpers.AnnSelectedNode+"="+otherNode), targets: all,
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantPV: wantMultihostPV(wffc, claim("shared-wffc"), mhDir, "node-a,node-b,node-c", ""),
		},
		{
			name: "one node failing leaves the claim in background", class: shared, claim: claim("shared"), targets: all,
			setup:     func(m *managertest.Fake) { fail(m, otherNode, unavailable, writes...) },
			wantState: controller.ProvisioningInBackground, wantCreate: all.ready,
			wantErr: `create directory "data-pvc-0000-uid" in pool "default": 2/3 nodes ready; failed on node "node-b": PUT: manager answered 503 Internal: disk on fire; will retry`,
		},
		{
			name: "a directory of another volume on one node is final", class: shared, claim: claim("shared"), targets: all,
			setup:     func(m *managertest.Fake) { m.Node(idleNode).AddVolume(directory("default", mhDir, "pvc-other", "")) },
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantErr: `on node "node-c" it belongs to PersistentVolume "pvc-other"; two claims cannot share a directory`,
		},
		{
			// An older manager confirmed a record another node planted
			// (issue 40): a retry cannot make it this claim's.
			name: "a node answering with another claim namespace's volume is final", class: shared, claim: claim("shared"), targets: all,
			setup: func(m *managertest.Fake) {
				m.Node(otherNode).AddVolume(directory("default", mhDir, testPVName, "evil"))
				m.Node(otherNode).UpdateVolume("default", mhDir, func(v *managerapi.Volume) { v.Multihost = true })
			},
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantErr: `the manager of node "node-b" answered the create of directory "data-pvc-0000-uid" in pool "default" with a volume that is not the one asked for: claim namespace "evil", not "ns"`,
		},
		{
			name: "a node answering with a node-mode volume is final", class: shared, claim: claim("shared"), targets: all,
			setup:     func(m *managertest.Fake) { m.Node(idleNode).AddVolume(directory("default", mhDir, testPVName, "ns")) },
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantErr: `the manager of node "node-c" answered the create of directory "data-pvc-0000-uid" in pool "default" with a volume that is not the one asked for: multihost false, not true`,
		},
		{
			name: "only pending nodes", class: shared, claim: claim("shared"), targets: fakeTargets{pending: []string{selfNode}},
			wantState: controller.ProvisioningInBackground,
			wantErr:   `create directory "data-pvc-0000-uid" in pool "default": 0/1 nodes ready (pending: "node-a", HostDefinition of the pool PendingForCreation or manager not Ready); will retry`,
		},
		{
			name: "no node defined", class: shared, claim: claim("shared"), targets: fakeTargets{serving: []string{selfNode}},
			wantState: controller.ProvisioningInBackground, wantErr: `no node has a Ready or defining (PendingForCreation) HostDefinition of pool "default"`,
		},
		{
			name: "managers that disagree on the pool's path", class: shared, claim: claim("shared"), targets: all,
			setup: func(m *managertest.Fake) {
				m.Node(otherNode).UpdatePool("default", func(p *managerapi.Pool) { p.Path = "/srv/pool" })
			},
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantErr: `"/srv/pool/data-pvc-0000-uid" on node "node-b"`,
		},
		{
			name: "reusing a directory is refused", class: shared, claim: claim("shared", hostpathv1.AnnotationReuseDirectory+"=old"), targets: all,
			wantState: controller.ProvisioningFinished, wantErr: `claim annotation hostpath.dev/reuse-directory is not supported in mode "multihost"`,
		},
		{
			name: "unsupported access mode", class: shared, claim: withAccessModes(claim("shared"), "ReadWriteSometimes"), targets: all,
			wantState: controller.ProvisioningFinished, wantErr: "access mode ReadWriteSometimes is not supported",
		},
		{
			// The PV's affinity names no node, so nodes that join later
			// match it: that of the manager DaemonSet.
			name:  "volumeType local: a local PV on the nodes that run a manager",
			class: class("shared-local", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{hostpathv1.ParamMode: "multihost", ParamPathPattern: mhPattern, ParamVolumeType: "local"}),
			claim: rwx(claim("shared-local", storagehelpers.AnnSelectedNode+"="+otherNode)), targets: all,
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantPV: func() *v1.PersistentVolume {
				pv := wantMultihostPV(class("shared-local", storagev1.VolumeBindingWaitForFirstConsumer, nil), rwx(claim("shared-local")), mhDir, "node-a,node-b,node-c", "")
				pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: pv.Spec.HostPath.Path}}
				pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{Key: "hostpath.dev/manager", Operator: v1.NodeSelectorOpNotIn, Values: []string{"false"}}},
				}}}}
				return pv
			}(),
		},
		{
			name:  "volumeType hostPath is the default's PV",
			class: class("shared-hostpath", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost", ParamPathPattern: mhPattern, ParamVolumeType: "hostPath"}),
			claim: claim("shared-hostpath"), targets: all,
			wantState: controller.ProvisioningFinished, wantCreate: all.ready,
			wantPV: wantMultihostPV(class("shared-hostpath", storagev1.VolumeBindingImmediate, nil), claim("shared-hostpath"), mhDir, "node-a,node-b,node-c", ""),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f, mgrs := multihostFixture(t, tc.targets)
			if tc.setup != nil {
				tc.setup(mgrs)
			}
			pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: tc.class, PVName: testPVName, PVC: tc.claim})
			if state != tc.wantState {
				t.Errorf("state = %s, want %s", state, tc.wantState)
			}
			checkErr(t, err, false, tc.wantErr)
			var created []string
			for _, n := range []string{selfNode, otherNode, idleNode} {
				if len(callsOf(mgrs.Node(n), managertest.CreateVolume)) == 0 {
					continue
				}
				created = append(created, n)
				if got := lastCreate(mgrs.Node(n)); got.Owner != testPVName || got.ReclaimPolicy != string(reclaimPolicy(tc.class)) || got.Mode != "0777" || !got.Multihost ||
					got.ClaimNamespace != tc.claim.Namespace || got.ClaimName != tc.claim.Name {
					t.Errorf("create on %s = %+v, want it for claim %s/%s", n, got, tc.claim.Namespace, tc.claim.Name)
				}

			}
			if strings.Join(created, ",") != strings.Join(tc.wantCreate, ",") {
				t.Errorf("creates on %v, want %v", created, tc.wantCreate)
			}
			if !checkPV(t, pv, tc.wantPV) {
				return
			}
			checkPendingEvent(t, f.recorder, tc.targets.pending)
		})
	}
}

// TestMultihostMismatchNotRetried: a node's answer that is not the volume
// asked for is not retried by the fan-out (it would answer the same),
// while an unavailable manager is.
func TestMultihostMismatchNotRetried(t *testing.T) {
	shared := class("shared", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost", ParamPathPattern: mhPattern})
	unavailable := &managerapi.Error{StatusCode: 503, Status: managerapi.Status{Reason: managerapi.ReasonInternal, Message: "disk on fire"}}
	_, ctx := ktesting.NewTestContext(t)
	f, mgrs := multihostFixture(t, fakeTargets{ready: []string{selfNode, otherNode}})
	f.prov.cfg.CreateFanout = fanout.Options{Attempts: 2, Backoff: time.Millisecond}
	mgrs.Node(selfNode).AddVolume(directory("default", mhDir, testPVName, "evil"))
	mgrs.Node(selfNode).UpdateVolume("default", mhDir, func(v *managerapi.Volume) { v.Multihost = true })
	fail(mgrs, otherNode, unavailable, writes...)
	if _, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: shared, PVName: testPVName, PVC: claim("shared")}); state != controller.ProvisioningFinished || err == nil {
		t.Fatalf("Provision = %s, %v; want finished with an error", state, err)
	}
	if n := len(callsOf(mgrs.Node(selfNode), managertest.CreateVolume)); n != 1 {
		t.Errorf("%d creates on the node answering another volume, want 1", n)
	}
	if n := len(callsOf(mgrs.Node(otherNode), managertest.CreateVolume)); n != 2 {
		t.Errorf("%d creates on the unavailable node, want 2", n)
	}
}

// checkPendingEvent checks that a multihost volume made while nodes were
// pending says so on the claim, naming them, and that nothing is said
// otherwise.
func checkPendingEvent(t *testing.T, r *record.FakeRecorder, pending []string) {
	t.Helper()
	select {
	case ev := <-r.Events:
		if len(pending) == 0 || !strings.HasPrefix(ev, "Warning "+ReasonNodesPending+" ") {
			t.Errorf("event %q, want none", ev)
			return
		}
		for _, n := range pending {
			if !strings.Contains(ev, fmt.Sprintf("%q", n)) {
				t.Errorf("event %q does not name the pending node %s", ev, n)
			}
		}
	default:
		if len(pending) > 0 {
			t.Errorf("no %s event naming %v", ReasonNodesPending, pending)
		}
	}
}

func TestBuildPVMultihost(t *testing.T) {
	c := class("shared", storagev1.VolumeBindingImmediate, nil)
	c.MountOptions = []string{"noatime"}
	pv := buildPV(pvInput{name: "pv", class: c, claim: claim("shared"), pool: "p", dir: "d",
		multihost: true, nodes: []string{"n1", "n2"}})
	switch {
	case pv.Spec.NodeAffinity != nil:
		t.Errorf("node affinity %v, want none", pv.Spec.NodeAffinity)
	case *pv.Spec.HostPath.Type != v1.HostPathDirectory || pv.Spec.HostPath.Path != "":
		t.Errorf("hostPath = %+v", pv.Spec.HostPath)
	case pv.Annotations[hostpathv1.AnnotationNodes] != "n1,n2" || pv.Annotations[hostpathv1.AnnotationMode] != "multihost" || pv.Annotations[hostpathv1.AnnotationRecordedPolicy] != "Delete":
		t.Errorf("annotations = %v", pv.Annotations)
	}
	for _, key := range []string{hostpathv1.AnnotationNode, hostpathv1.AnnotationPendingNodes} {
		if _, ok := pv.Annotations[key]; ok {
			t.Errorf("annotation %s set, want none", key)
		}
	}
	if len(pv.Finalizers) != 1 || pv.Finalizers[0] != hostpathv1.FinalizerDirectoryProtection {
		t.Errorf("finalizers = %v", pv.Finalizers)
	}
}

// TestMultihostOwnerAgreement checks that instances that see the same
// provisioner pods agree on the one that provisions each multihost claim and
// deletes each multihost volume, and that the claims spread over them.
func TestMultihostOwnerAgreement(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	pods := factory.Core().V1().Pods().Informer().GetIndexer()
	classes := factory.Storage().V1().StorageClasses()
	if err := classes.Informer().GetIndexer().Add(class("multihost", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost"})); err != nil {
		t.Fatal(err)
	}
	nodes := []string{selfNode, otherNode, idleNode}
	for _, n := range nodes {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "prov-" + n, Labels: map[string]string{"app": "prov"}},
			Spec:       v1.PodSpec{NodeName: n},
			Status:     v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
		}
		if err := pods.Add(podstub.From(pod)); err != nil {
			t.Fatal(err)
		}
	}
	var provs []*Provisioner
	for _, n := range nodes {
		inst := responsibility.NewPodInstances(podstub.NewLister(pods, "sys"), n)
		provs = append(provs, New(Config{Names: testNames, Node: n, Classes: classes.Lister(), Instances: inst}))
	}
	owned := map[string]int{}
	for i := range 60 {
		c := claim("multihost")
		c.UID = types.UID(fmt.Sprintf("uid-%d", i))
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", UID: c.UID, Annotations: map[string]string{hostpathv1.AnnotationMode: "multihost"}}}
		var provisioners, deleters []string
		for _, p := range provs {
			if p.ShouldProvision(ctx, c) {
				provisioners = append(provisioners, p.cfg.Node)
			}
			if p.ShouldDelete(ctx, pv) {
				deleters = append(deleters, p.cfg.Node)
			}
		}
		if len(provisioners) != 1 || len(deleters) != 1 || provisioners[0] != deleters[0] {
			t.Fatalf("claim %s: provisioned by %v, deleted by %v; want one and the same instance", c.UID, provisioners, deleters)
		}
		owned[provisioners[0]]++
	}
	for _, n := range nodes {
		if owned[n] == 0 {
			t.Errorf("instance %s owns no claim of 60: %v", n, owned)
		}
	}
}

// mhPattern is the pathPattern of the multihost classes of these tests,
// and mhDir what it gives for claim("…") and testPVName: a multihost
// directory carries the PV's name (checkMultihostDirectory).
const (
	mhPattern = "${pvc.metadata.name}-${pv.metadata.name}"
	mhDir     = "data-" + testPVName
)

// TestCheckMultihostDirectory: a multihost directory must carry its
// claim's UID, which the API server's admission policy checks; a pattern
// without ${pv.metadata.name}, or a name shortened past the UID, is a
// parameter error before any directory is made.
func TestCheckMultihostDirectory(t *testing.T) {
	const uid = "0b7d4f4e-5d7a-4a57-9d2e-9f6f2b3c1a11"
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "data", UID: uid}}
	long := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: strings.Repeat("n", 250), UID: uid}}
	for _, tc := range []struct {
		name, pattern string
		claim         *v1.PersistentVolumeClaim
		wantErr       string
	}{
		{name: "the default pattern", pattern: DefaultPathPattern, claim: claim},
		{name: "the PV name alone", pattern: "${pv.metadata.name}", claim: claim},
		{name: "no PV name", pattern: "${pvc.metadata.namespace}-${pvc.metadata.name}", claim: claim, wantErr: "must contain the claim's UID " + uid},
		{name: "the UID cut off a long name", pattern: DefaultPathPattern, claim: long, wantErr: "shorter names if it is cut"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params, err := ParseParameters(map[string]string{"mode": "multihost", ParamPathPattern: tc.pattern})
			if err != nil {
				t.Fatal(err)
			}
			dir, err := params.Directory(tc.claim.Namespace, tc.claim.Name, "pvc-"+uid)
			if err != nil {
				t.Fatal(err)
			}
			err = checkMultihostDirectory(dir, tc.claim)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("checkMultihostDirectory(%q) = %v, want nil", dir, err)
				}
				return
			}
			var pe *ParameterError
			if !errors.As(err, &pe) || pe.Parameter != ParamPathPattern || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("checkMultihostDirectory(%q) = %v, want a pathPattern error containing %q", dir, err, tc.wantErr)
			}
		})
	}
}
