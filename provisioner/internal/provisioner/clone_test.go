package provisioner

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// sourceClaim is claim ns/src of className, Bound to PV pv-src.
func sourceClaim(className string) *v1.PersistentVolumeClaim {
	c := claim(className)
	c.Name, c.UID = "src", types.UID("src-uid")
	c.Spec.VolumeName = "pv-src"
	c.Status.Phase = v1.ClaimBound
	return c
}

// sourcePV is the PV of sourceClaim: directory src-dir of pool default on
// node, of size.
func sourcePV(node, size string) *v1.PersistentVolume {
	pv := volume("pv-src", node, "default", "src-dir", "src")
	pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
	return pv
}

// sourceDir is the directory of sourcePV on its managers.
var sourceDir = managerapi.Volume{Pool: "default", Name: "src-dir", Owner: "pv-src", SizeBytes: 1 << 30}

// cloneOf is claim ns/data of className whose data source is claim src.
func cloneOf(className, src string, keyValues ...string) *v1.PersistentVolumeClaim {
	c := claim(className, keyValues...)
	c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: src}
	return c
}

// TestCloneDecision: a node-mode clone belongs to its source's node, which
// sets selected-node on it (in any binding mode); a clone whose source
// cannot be cloned is provisioned by no instance, and the elected one
// says why in an event.
func TestCloneDecision(t *testing.T) {
	otherNS := cloneOf("wffc", "src")
	otherNS.Spec.DataSource = nil
	otherNS.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src", Namespace: ptr.To("team-b")}
	snapshot := cloneOf("wffc", "src")
	snapshot.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
	unbound := sourceClaim("wffc")
	unbound.Spec.VolumeName, unbound.Status.Phase = "", v1.ClaimPending
	for _, tc := range []struct {
		name       string
		clone      *v1.PersistentVolumeClaim
		objects    []any
		elected    bool
		wantVerdit verdict
		wantEvents []string
		wantInMsg  string
	}{
		{name: "source on this node, WaitForFirstConsumer", clone: cloneOf("wffc", "src"),
			objects: []any{sourceClaim("wffc"), sourcePV(selfNode, "1Gi")}, wantVerdit: selectNode,
			wantEvents: []string{"Normal " + ReasonNodeSelected}, wantInMsg: "the node of the clone's source"},
		{name: "source on this node, Immediate", clone: cloneOf("immediate", "src"),
			objects: []any{sourceClaim("immediate"), sourcePV(selfNode, "1Gi")}, wantVerdit: selectNode,
			wantEvents: []string{"Normal " + ReasonNodeSelected}},
		{name: "source on this node, selected there", clone: cloneOf("wffc", "src", storagehelpers.AnnSelectedNode+"="+selfNode),
			objects: []any{sourceClaim("wffc"), sourcePV(selfNode, "1Gi")}, wantVerdit: provision},
		{name: "source on another node wins over provision-on-node", clone: cloneOf("wffc", "src", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			objects: []any{sourceClaim("wffc"), sourcePV(otherNode, "1Gi")}, elected: true, wantVerdit: elsewhere},
		{name: "provision-on-node that disagrees with the source", clone: cloneOf("wffc", "src", hostpathv1.AnnotationProvisionOnNode+"="+otherNode),
			objects: []any{sourceClaim("wffc"), sourcePV(selfNode, "1Gi")}, wantVerdit: selectNode,
			wantEvents: []string{"Warning " + ReasonNodeConflict, "Normal " + ReasonNodeSelected}, wantInMsg: "the volume goes to \"node-a\""},
		{name: "source missing", clone: cloneOf("wffc", "src"), elected: true, wantVerdit: elsewhere,
			wantEvents: []string{"Warning " + ReasonCloneSourceInvalid}, wantInMsg: "source claim ns/src does not exist"},
		{name: "source missing, not elected", clone: cloneOf("wffc", "src"), wantVerdit: elsewhere},
		{name: "source in another namespace", clone: otherNS, elected: true, wantVerdit: elsewhere,
			wantEvents: []string{"Warning " + ReasonCloneSourceInvalid}, wantInMsg: "in another namespace"},
		{name: "source of another class", clone: cloneOf("wffc", "src"), objects: []any{sourceClaim("immediate"), sourcePV(selfNode, "1Gi")},
			elected: true, wantVerdit: elsewhere, wantEvents: []string{"Warning " + ReasonCloneSourceInvalid}, wantInMsg: `is of StorageClass "immediate"`},
		{name: "source larger than the clone", clone: cloneOf("wffc", "src"), objects: []any{sourceClaim("wffc"), sourcePV(selfNode, "2Gi")},
			elected: true, wantVerdit: elsewhere, wantEvents: []string{"Warning " + ReasonCloneSourceInvalid}, wantInMsg: "requests 1Gi, less than the 2Gi"},
		{name: "a snapshot", clone: snapshot, elected: true, wantVerdit: elsewhere,
			wantEvents: []string{"Warning " + ReasonCloneSourceInvalid}, wantInMsg: "VolumeSnapshot.snapshot.storage.k8s.io"},
		{name: "source not bound yet", clone: cloneOf("wffc", "src"), objects: []any{unbound}, elected: true, wantVerdit: elsewhere,
			wantEvents: []string{"Normal " + ReasonCloneSourcePending}, wantInMsg: "not Bound yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			objects := append(append(testNodes(), testClasses()...), tc.objects...)
			f := newFixture(t, responsibilitytest.Instances{Wins: tc.elected, On: []string{selfNode, otherNode}}, append(objects, tc.clone)...)
			d, err := f.prov.decide(ctx, tc.clone)
			if err != nil {
				t.Fatal(err)
			}
			if d.verdict != tc.wantVerdit {
				t.Errorf("verdict = %v, want %v", d.verdict, tc.wantVerdit)
			}
			if got := f.prov.ShouldProvision(ctx, tc.clone); got != (tc.wantVerdit == provision) {
				t.Errorf("ShouldProvision = %t", got)
			}
			synced := f.syncClaim(ctx, t, tc.clone, 0)
			events := hostpathtest.Events(f.recorder)
			hostpathtest.CheckEvents(t, events, tc.wantEvents)
			if tc.wantInMsg != "" && !strings.Contains(strings.Join(events, "\n"), tc.wantInMsg) {
				t.Errorf("events %q do not say %q", events, tc.wantInMsg)
			}
			if tc.wantVerdit == selectNode && synced.Annotations[storagehelpers.AnnSelectedNode] != selfNode {
				t.Errorf("selected-node = %q, want %q", synced.Annotations[storagehelpers.AnnSelectedNode], selfNode)
			}
		})
	}
}

// TestProvisionClone: the source node's instance has its manager clone
// the source's directory, follows the copy, reports it, and returns a PV
// on the source's node; a copy that outlasts CloneWait is left running.
func TestProvisionClone(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	wffc := class("wffc", storagev1.VolumeBindingWaitForFirstConsumer, nil)
	clone := cloneOf("wffc", "src", storagehelpers.AnnSelectedNode+"="+selfNode)
	f := newFixture(t, responsibilitytest.Instances{On: []string{selfNode}}, append(testNodes(), sourceClaim("wffc"), sourcePV(selfNode, "1Gi"), clone)...)
	f.manager.AddVolume(sourceDir)
	f.manager.CloneSteps(2)
	pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: wffc, PVName: testPVName, PVC: clone})
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision = %s, %v", state, err)
	}
	want := "default/ns-data-" + testPVName + " from default/src-dir of pv-src 1Gi by " + testPVName
	if got := strings.Join(callsOf(f.manager, managertest.CloneVolume), ", "); got != strings.Repeat(want+", ", 2)+want {
		t.Errorf("manager clones = %q, want 3 calls of %q", got, want)
	}
	if len(callsOf(f.manager, managertest.CreateVolume)) != 0 {
		t.Errorf("creates = %q, want none", callsOf(f.manager, managertest.CreateVolume))
	}
	if pv.Annotations[hostpathv1.AnnotationNode] != selfNode || pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/var/hpvolumes/ns-data-"+testPVName {
		t.Errorf("pv = %+v", pv)
	}
	events := hostpathtest.Events(f.recorder)
	hostpathtest.CheckEvents(t, events, []string{"Normal " + ReasonCloneStarted, "Normal " + ReasonCloneProgress, "Normal " + ReasonCloneFinished})
	if !strings.Contains(events[2], "by copy in ") {
		t.Errorf("CloneFinished = %q, want the method", events[2])
	}

	// A copy still running when CloneWait ends is left to the library's
	// next call.
	f2 := newFixture(t, responsibilitytest.Instances{On: []string{selfNode}}, append(testNodes(), sourceClaim("wffc"), sourcePV(selfNode, "1Gi"), clone)...)
	f2.manager.AddVolume(sourceDir)
	f2.manager.CloneSteps(1 << 30)
	f2.prov.cfg.CloneWait = 20 * f2.prov.cfg.ClonePoll
	_, state, err = f2.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: wffc, PVName: testPVName, PVC: clone})
	if state != controller.ProvisioningInBackground || err == nil || !strings.Contains(err.Error(), "still being copied") {
		t.Errorf("Provision = %s, %v; want in background, still being copied", state, err)
	}
}

// TestProvisionMultihostClone: a multihost clone is a clone on every ready
// node; a node-mode source is refused.
func TestProvisionMultihostClone(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	shared := class("multihost", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost"})
	srcPV := sourcePV("", "1Gi")
	srcPV.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeMultihost
	srcPV.Annotations[hostpathv1.AnnotationNodes] = selfNode + "," + otherNode
	delete(srcPV.Annotations, hostpathv1.AnnotationNode)
	clone := cloneOf("multihost", "src")
	clone.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	f, managers := multihostFixture(t, fakeTargets{ready: []string{selfNode, otherNode}}, sourceClaim("multihost"), srcPV, clone)
	for _, n := range []string{selfNode, otherNode} {
		managers.Node(n).AddVolume(sourceDir)
	}
	pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: shared, PVName: testPVName, PVC: clone})
	if err != nil || state != controller.ProvisioningFinished || pv == nil {
		t.Fatalf("Provision = %v, %s, %v", pv, state, err)
	}
	for _, n := range []string{selfNode, otherNode} {
		if got := strings.Join(callsOf(managers.Node(n), managertest.CloneVolume), ", "); !strings.Contains(got, "from default/src-dir of pv-src") || len(callsOf(managers.Node(n), managertest.CreateVolume)) != 0 {
			t.Errorf("node %s: clones %q, creates %q", n, got, callsOf(managers.Node(n), managertest.CreateVolume))
		}
	}
	hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), []string{"Normal " + ReasonCloneStarted, "Normal " + ReasonCloneFinished})

	nodeSource := sourcePV(selfNode, "1Gi")
	f, managers = multihostFixture(t, fakeTargets{ready: []string{selfNode}}, sourceClaim("multihost"), nodeSource, clone)
	_, state, err = f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: shared, PVName: testPVName, PVC: clone})
	if state != controller.ProvisioningFinished || err == nil || !strings.Contains(err.Error(), "needs a multihost source") {
		t.Errorf("Provision = %s, %v; want a refusal", state, err)
	}
	if len(callsOf(managers.Node(selfNode), managertest.CloneVolume)) != 0 {
		t.Errorf("clones = %q, want none", callsOf(managers.Node(selfNode), managertest.CloneVolume))
	}
	hostpathtest.CheckEvents(t, hostpathtest.Events(f.recorder), []string{"Warning " + ReasonCloneSourceInvalid})
}

// TestClonesWaitForTheirSource: when a source claim is bound, the claim
// sync queues its unbound clones.
func TestClonesWaitForTheirSource(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	clone := cloneOf("wffc", "src")
	f := newFixture(t, responsibilitytest.Instances{On: []string{selfNode}}, append(append(testNodes(), testClasses()...), sourceClaim("wffc"), sourcePV(selfNode, "1Gi"), clone)...)
	f.sync.enqueueClones(sourceClaim("wffc"))
	if n := f.sync.queue.Len(); n != 1 {
		t.Fatalf("queued %d claims, want the clone", n)
	}
	if !f.sync.queue.ProcessNextWorkItem(ctx) {
		t.Fatal("ProcessNextWorkItem = false")
	}
	got, err := f.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[storagehelpers.AnnSelectedNode] != selfNode {
		t.Errorf("clone's selected-node = %q, want %q", got.Annotations[storagehelpers.AnnSelectedNode], selfNode)
	}
}

// TestCloneRequest: a clone's request names the clone's claim (not its
// source's) and its namespace, in node mode as in multihost mode, where
// the managers of other nodes check the claim before they copy; it names
// the source's directory and owner.
func TestCloneRequest(t *testing.T) {
	src := &source{claim: sourceClaim("wffc"), pv: sourcePV(selfNode, "1Gi"), dir: hostpathv1.VolumeDirectory{Pool: "default", Directory: "src-dir", Node: selfNode}}
	for _, tc := range []struct {
		desc      string
		multihost bool
	}{
		{desc: "node mode"},
		{desc: "multihost", multihost: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			clone := cloneOf("wffc", "src")
			in := pvInput{name: testPVName, class: class("wffc", storagev1.VolumeBindingImmediate, nil), claim: clone, pool: "default", dir: "ns-data",
				size: resource.MustParse("1Gi"), node: selfNode, hostname: selfNode, multihost: tc.multihost}
			if tc.multihost {
				in.node, in.hostname, in.nodes = "", "", []string{selfNode, otherNode}
			}
			req := cloneRequest(buildPV(in), src, "0750", false)
			want := managerapi.CloneVolumeRequest{
				CreateVolumeRequest: managerapi.CreateVolumeRequest{Owner: testPVName, Mode: "0750", ReclaimPolicy: managerapi.ReclaimDelete, ClaimNamespace: clone.Namespace,
					ClaimName: clone.Name, RequiredBytes: 1 << 30, Multihost: tc.multihost},
				SourcePool: "default", SourceName: "src-dir", SourceOwner: "pv-src",
			}
			if req != want {
				t.Errorf("cloneRequest = %+v, want %+v", req, want)
			}
		})
	}
}
