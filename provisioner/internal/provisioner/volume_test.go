package provisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

const testPVName = "pvc-0000-uid"

// wantPV is the PV expected for claim ns/data of class with the directory dir
// on selfNode (whose hostname label is selfNode-host).
func wantPV(class *storagev1.StorageClass, c *v1.PersistentVolumeClaim, dir string) *v1.PersistentVolume {
	reclaim := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	recorded := "Delete"
	if reclaim != v1.PersistentVolumeReclaimDelete {
		recorded = "Retain"
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: testPVName, Labels: map[string]string{hostpathv1.LabelNode: selfNode}, Annotations: map[string]string{
			hostpathv1.AnnotationNode: selfNode, hostpathv1.AnnotationPool: "default", hostpathv1.AnnotationDirectory: dir,
			hostpathv1.AnnotationClaimNamespace: "ns", hostpathv1.AnnotationClaimName: "data", hostpathv1.AnnotationMode: "node", hostpathv1.AnnotationSizeEnforcement: hostpathv1.EnforcementNone,
			hostpathv1.AnnotationRecordedPolicy: recorded,
		}, Finalizers: []string{"hostpath.dev/directory-protection"}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: c.Spec.Resources.Requests[v1.ResourceStorage]},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  class.MountOptions,
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{
				Path: "/var/hpvolumes/" + dir, Type: ptr.To(v1.HostPathDirectory),
			}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{selfNode + "-host"}}},
			}}}},
		},
	}
}

// wantLocalPV is wantPV with spec.local on the same path instead of
// spec.hostPath (volumeType local).
func wantLocalPV(class *storagev1.StorageClass, c *v1.PersistentVolumeClaim, dir string) *v1.PersistentVolume {
	pv := wantPV(class, c, dir)
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: pv.Spec.HostPath.Path}}
	return pv
}

func TestProvision(t *testing.T) {
	retainClass := class("retain", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamPool: "default", hostpathv1.ParamDirMode: "0770", ParamPathPattern: "${pvc.metadata.name}.${pv.metadata.name}"})
	retainClass.ReclaimPolicy = ptr.To(v1.PersistentVolumeReclaimRetain)
	immediate := class("immediate", storagev1.VolumeBindingImmediate, nil)
	wffc := class("wffc", storagev1.VolumeBindingWaitForFirstConsumer, nil)
	defaultDir := "ns-data-" + testPVName
	local := class("local", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{hostpathv1.ParamMode: "node", ParamVolumeType: "local"})
	localRetain := class("local-retain", storagev1.VolumeBindingImmediate, map[string]string{ParamVolumeType: "local", ParamPathPattern: "${pvc.metadata.name}"})
	localRetain.ReclaimPolicy = ptr.To(v1.PersistentVolumeReclaimRetain)
	localRetain.MountOptions = []string{"noatime"}
	hostPathClass := class("hostpath", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{ParamVolumeType: "hostPath"})
	hostPathMount := class("hostpath-mount", storagev1.VolumeBindingWaitForFirstConsumer, nil)
	hostPathMount.MountOptions = []string{"noatime"}
	sharedMount := class("shared-mount", storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: "multihost"})
	sharedMount.MountOptions = []string{"noatime"}
	hostnameIn := func(name string, mode string, hosts ...string) *storagev1.StorageClass {
		c := class(name, storagev1.VolumeBindingImmediate, map[string]string{hostpathv1.ParamMode: mode})
		c.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: v1.LabelHostname, Values: hosts}}}}
		return c
	}
	here := hostnameIn("here", hostpathv1.ModeNode, "elsewhere", selfNode+"-host")
	there := hostnameIn("there", hostpathv1.ModeNode, "elsewhere")
	sharedThere := hostnameIn("shared-there", hostpathv1.ModeMultihost, "elsewhere")

	shared := class("shared", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{ParamPathPattern: "${pvc.metadata.name}"})
	longName := strings.Repeat("a", 253)
	longDir, err := Parameters{PathPattern: DefaultPathPattern}.Directory("ns", longName, testPVName)
	if err != nil {
		t.Fatal(err)
	}
	longPV := wantPV(immediate, claim("immediate"), longDir)
	longPV.Annotations[hostpathv1.AnnotationClaimName] = longName
	const maxInt64 = "9223372036854775807"

	insufficient := fmt.Errorf("PUT: %w", &managerapi.Error{StatusCode: 507, Status: managerapi.Status{Reason: managerapi.ReasonInsufficientStorage, Message: "pool default has 1 KiB free"}})
	tests := []struct {
		name        string
		class       *storagev1.StorageClass
		claim       *v1.PersistentVolumeClaim
		managerErr  error
		existing    map[string]string // directories of pool default and their owners
		volumes     []any             // PVs in the cache
		wantState   controller.ProvisioningState
		wantErr     string // substring; "" for success
		wantIgnored bool
		wantCreate  string // "" for no manager call
		wantPV      *v1.PersistentVolume
	}{
		{
			name: "Immediate claim pinned by annotation", class: immediate,
			claim:     claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
			wantPV: wantPV(immediate, claim("immediate"), defaultDir),
		},
		{
			name: "WaitForFirstConsumer claim on the selected node", class: wffc,
			claim:     claim("wffc", storagehelpers.AnnSelectedNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
			wantPV: wantPV(wffc, claim("wffc"), defaultDir),
		},
		{
			name: "annotation wins over the scheduler's node", class: wffc,
			claim:     claim("wffc", hostpathv1.AnnotationProvisionOnNode+"="+selfNode, storagehelpers.AnnSelectedNode+"="+otherNode),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
			wantPV: wantPV(wffc, claim("wffc"), defaultDir),
		},
		{
			name: "Retain class with parameters", class: retainClass,
			claim:     withAccessModes(claim("retain", hostpathv1.AnnotationKubevirtProvisionOnNode+"="+selfNode), v1.ReadWriteOncePod, v1.ReadOnlyMany),
			wantState: controller.ProvisioningFinished, wantCreate: "default/data." + testPVName + " 0770 1Gi by " + testPVName,
			wantPV: wantPV(retainClass, withAccessModes(claim("retain"), v1.ReadWriteOncePod, v1.ReadOnlyMany), "data."+testPVName),
		},
		{
			name: "volumeType local: a local PV on the same path, with node affinity", class: local,
			claim:     claim("local", storagehelpers.AnnSelectedNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
			wantPV: wantLocalPV(local, claim("local"), defaultDir),
		},
		{
			name: "volumeType local with Retain, mount options and a pinned Immediate claim", class: localRetain,
			claim:     claim("local-retain", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantCreate: "default/data 0777 1Gi by " + testPVName,
			wantPV: wantLocalPV(localRetain, claim("local-retain"), "data"),
		},
		{
			name: "volumeType local: ReadWriteMany is refused as in node mode", class: local,
			claim:     withAccessModes(claim("local", storagehelpers.AnnSelectedNode+"="+selfNode), v1.ReadWriteMany),
			wantState: controller.ProvisioningFinished, wantErr: "ReadWriteMany is not supported in mode \"node\"",
		},
		{
			name: "volumeType hostPath is the default's PV", class: hostPathClass,
			claim:     claim("hostpath", storagehelpers.AnnSelectedNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
			wantPV: wantPV(hostPathClass, claim("hostpath"), defaultDir),
		},
		{
			name: "mount options on a hostPath class are refused", class: hostPathMount,
			claim:     claim("hostpath-mount", storagehelpers.AnnSelectedNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantErr: `StorageClass mountOptions ["noatime"] are not supported with volumeType "hostPath"`,
		},
		{
			name: "mount options on a multihost hostPath class are refused", class: sharedMount,
			claim:     claim("shared-mount"),
			wantState: controller.ProvisioningFinished, wantErr: `StorageClass mountOptions ["noatime"] are not supported with volumeType "hostPath"`,
		},
		{
			name: "allowedTopologies that hold this node", class: here,
			claim:     claim("here", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
			wantPV: wantPV(here, claim("here"), defaultDir),
		},
		{
			name: "a claim pinned outside the allowedTopologies is refused", class: there,
			claim:     claim("there", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			wantState: controller.ProvisioningFinished,
			wantErr:   `node "` + selfNode + `" is not in the allowedTopologies of StorageClass there (kubernetes.io/hostname in (elsewhere))`,
		},
		{
			name: "allowedTopologies on a multihost class are refused", class: sharedThere,
			claim:     claim("shared-there"),
			wantState: controller.ProvisioningFinished,
			wantErr:   `StorageClass allowedTopologies (kubernetes.io/hostname in (elsewhere)) are not supported in mode "multihost"`,
		},
		{
			name: "bad volumeType", class: class("bad", storagev1.VolumeBindingImmediate, map[string]string{ParamVolumeType: "Local"}),
			claim:     claim("bad", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantErr: `StorageClass parameter "volumeType": "Local" is not a volume type; use "hostPath" or "local"`,
		},
		{
			name: "ReadWriteMany is refused", class: immediate,
			claim:     withAccessModes(claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode), v1.ReadWriteMany),
			wantState: controller.ProvisioningFinished, wantErr: "ReadWriteMany is not supported in mode \"node\"",
		},
		{
			name: "unknown parameter", class: class("bad", storagev1.VolumeBindingImmediate, map[string]string{"size": "1"}),
			claim:     claim("bad", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantErr: `StorageClass parameter "size": unknown parameter`,
		},
		{
			name: "pathPattern that escapes the pool", class: class("bad", storagev1.VolumeBindingImmediate, map[string]string{ParamPathPattern: "../${pvc.metadata.name}"}),
			claim:     claim("bad", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			wantState: controller.ProvisioningFinished, wantErr: `StorageClass parameter "pathPattern"`,
		},
		{
			name: "claim moved to another node since ShouldProvision", class: immediate,
			claim:     claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+otherNode),
			wantState: controller.ProvisioningFinished, wantIgnored: true,
		},
		{
			name: "no space on a pinned claim is final", class: wffc,
			claim:      claim("wffc", hostpathv1.AnnotationProvisionOnNode+"="+selfNode, storagehelpers.AnnSelectedNode+"="+selfNode),
			managerErr: insufficient,
			wantState:  controller.ProvisioningFinished, wantErr: "the volume does not fit in the pool", wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
		},
		{
			name: "no space on a scheduled claim asks for another node", class: wffc,
			claim:      claim("wffc", storagehelpers.AnnSelectedNode+"="+selfNode),
			managerErr: insufficient,
			wantState:  controller.ProvisioningReschedule, wantErr: "asking the scheduler for another node", wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
		},
		{
			name: "manager unreachable is retried", class: immediate,
			claim:      claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
			managerErr: errors.New("dial tcp 198.18.1.2:8080: connection refused"),
			wantState:  controller.ProvisioningInBackground, wantErr: "manager unreachable", wantCreate: "default/" + defaultDir + " 0777 1Gi by " + testPVName,
		},
		{
			name: "directory of another claim's volume is refused, without asking for another node", class: shared,
			claim:     claim("shared", storagehelpers.AnnSelectedNode+"="+selfNode),
			existing:  map[string]string{"data": "pvc-other"},
			volumes:   []any{volume("pvc-other", selfNode, "default", "data", "data")},
			wantState: controller.ProvisioningFinished, wantCreate: "default/data 0777 1Gi by " + testPVName,
			wantErr: `directory "data" in pool "default" on node "node-a" belongs to PersistentVolume "pvc-other" (claim team-a/data); two claims cannot share a directory: use a pathPattern with ${pv.metadata.name}, or reuse a retained directory with the annotation hostpath.dev/reuse-directory`,
		},
		{
			name: "directory of a deleted volume is not taken without the annotation", class: shared,
			claim:     claim("shared", storagehelpers.AnnSelectedNode+"="+selfNode),
			existing:  map[string]string{"data": "pvc-gone"},
			wantState: controller.ProvisioningFinished, wantCreate: "default/data 0777 1Gi by " + testPVName,
			wantErr: `belongs to PersistentVolume "pvc-gone" (deleted: the directory was retained); two claims cannot share a directory`,
		},
		{
			name: "directory without an owner record is not taken", class: shared,
			claim:     claim("shared", storagehelpers.AnnSelectedNode+"="+selfNode),
			existing:  map[string]string{"data": ""},
			wantState: controller.ProvisioningFinished, wantCreate: "default/data 0777 1Gi by " + testPVName,
			wantErr: `directory "data" in pool "default" on node "node-a" belongs to no PersistentVolume (it has no owner record`,
		},
		{
			name: "the volume's own directory again (a retry)", class: shared,
			claim:     claim("shared", storagehelpers.AnnSelectedNode+"="+selfNode),
			existing:  map[string]string{"data": testPVName},
			wantState: controller.ProvisioningFinished, wantCreate: "default/data 0777 1Gi by " + testPVName,
			wantPV: wantPV(shared, claim("shared"), "data"),
		},
		{
			name: "request beyond int64 is refused, not parsed into a wrong size", class: immediate,
			claim:     withSize(claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode), "1e19"),
			wantState: controller.ProvisioningFinished, wantErr: "the claim requests 10e18 of storage, more than the largest volume size of " + maxInt64 + " bytes",
		},
		{
			name: "request one byte beyond int64 is refused", class: immediate,
			claim:     withSize(claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode), "9223372036854775808"),
			wantState: controller.ProvisioningFinished, wantErr: "more than the largest volume size",
		},
		{
			name: "largest int64 request is sent exactly", class: immediate,
			claim:     withSize(claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode), maxInt64),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + defaultDir + " 0777 " + maxInt64 + " by " + testPVName,
			wantPV: wantPV(immediate, withSize(claim("immediate"), maxInt64), defaultDir),
		},
		{
			name: "claim name too long for the default pattern gets a hash suffix", class: immediate,
			claim:     withName(claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode), longName),
			wantState: controller.ProvisioningFinished, wantCreate: "default/" + longDir + " 0777 1Gi by " + testPVName,
			wantPV: longPV,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, responsibilitytest.Instances{}, append(testNodes(), tc.volumes...)...)
			fail(f.managers, selfNode, tc.managerErr, writes...)
			for dir, owner := range tc.existing {
				f.manager.AddVolume(directory("default", dir, owner, tc.claim.Namespace))
			}
			pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: tc.class, PVName: testPVName, PVC: tc.claim})
			if state != tc.wantState {
				t.Errorf("state = %s, want %s", state, tc.wantState)
			}
			checkErr(t, err, tc.wantIgnored, tc.wantErr)
			gotCreate := strings.Join(callsOf(f.manager, managertest.CreateVolume), ", ")
			if gotCreate != tc.wantCreate {
				t.Errorf("manager creates = %q, want %q", gotCreate, tc.wantCreate)
			}
			if gotCreate != "" && lastCreate(f.manager).ClaimNamespace != tc.claim.Namespace {
				t.Errorf("create records claim namespace %q, want the claim's %q", lastCreate(f.manager).ClaimNamespace, tc.claim.Namespace)
			}
			if lastCreate(f.manager).Multihost {
				t.Errorf("a node-mode create says multihost: %+v", lastCreate(f.manager))
			}
			if !checkPV(t, pv, tc.wantPV) {
				return
			}
		})
	}
}

func TestProvisionWithoutManager(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, responsibilitytest.Instances{}, testNodes()...)
	f.prov.cfg.Managers = func(node string) (VolumeManager, error) {
		return nil, fmt.Errorf("no Ready manager pod (selector app=m) on node %q", node)
	}
	_, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{
		StorageClass: class("immediate", storagev1.VolumeBindingImmediate, nil), PVName: testPVName,
		PVC: claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
	})
	if state != controller.ProvisioningInBackground || err == nil || !strings.Contains(err.Error(), "no Ready manager pod") || !strings.Contains(err.Error(), "will retry") {
		t.Errorf("Provision = %s, %v; want in background with no Ready manager pod, will retry", state, err)
	}
}

func TestProvisionNodeWithoutHostnameLabel(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, responsibilitytest.Instances{}, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: selfNode}})
	_, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{
		StorageClass: class("immediate", storagev1.VolumeBindingImmediate, nil), PVName: testPVName,
		PVC: claim("immediate", hostpathv1.AnnotationProvisionOnNode+"="+selfNode),
	})
	if state != controller.ProvisioningFinished || err == nil || !strings.Contains(err.Error(), v1.LabelHostname) {
		t.Errorf("Provision = %s, %v; want finished naming the %s label", state, err, v1.LabelHostname)
	}
	if len(callsOf(f.manager, managertest.CreateVolume)) != 0 {
		t.Errorf("manager creates = %q, want none", callsOf(f.manager, managertest.CreateVolume))
	}
}

// TestDelete: the library's Delete goes through the one deletion path
// (Config.Reclaim) on the instance the DeletionGuard names, every time
// (Reclaim itself remembers a PV it finished, and answers a second call
// without a manager call: package reclaim's TestReclaimThenFinalize), and
// passes its failure on for the library to retry.
func TestDelete(t *testing.T) {
	failed := errors.New("the directory is not removed yet on node-b")
	tests := []struct {
		name        string
		node        string
		multihost   bool
		elected     bool
		reclaimErr  error
		wantCalls   int // calls of Reclaim over two Deletes
		wantIgnored bool
		wantErr     string
	}{
		{name: "own volume", node: selfNode, wantCalls: 2},
		{name: "volume of another node", node: otherNode, wantIgnored: true},
		{name: "reclaim fails: retried", node: selfNode, reclaimErr: failed, wantCalls: 2, wantErr: failed.Error()},
		{name: "multihost, elected", multihost: true, elected: true, wantCalls: 2},
		{name: "multihost, not elected", multihost: true, wantIgnored: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pv := volume("pv", tc.node, "default", "dir", "data")
			if tc.multihost {
				delete(pv.Annotations, hostpathv1.AnnotationNode)
				pv.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeMultihost
			}
			f := newFixture(t, responsibilitytest.Instances{Wins: tc.elected}, pv)
			calls := 0
			f.prov.cfg.Reclaim = func(_ context.Context, got *v1.PersistentVolume) error {
				calls++
				if got.Name != pv.Name {
					t.Errorf("Reclaim(%s), want %s", got.Name, pv.Name)
				}
				return tc.reclaimErr
			}
			err := f.prov.Delete(ctx, pv)
			checkErr(t, err, tc.wantIgnored, tc.wantErr)
			err = f.prov.Delete(ctx, pv)
			checkErr(t, err, tc.wantIgnored, tc.wantErr)
			if calls != tc.wantCalls {
				t.Errorf("Reclaim called %d times over two Deletes, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func withSize(c *v1.PersistentVolumeClaim, size string) *v1.PersistentVolumeClaim {
	c.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse(size)
	return c
}

func withName(c *v1.PersistentVolumeClaim, name string) *v1.PersistentVolumeClaim {
	c.Name = name
	return c
}

func withAccessModes(c *v1.PersistentVolumeClaim, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
	c.Spec.AccessModes = modes
	return c
}

// checkErr checks a Provision or Delete error: an IgnoredError when
// wantIgnored, else none when wantErr is empty, else one containing wantErr.
func checkErr(t *testing.T, err error, wantIgnored bool, wantErr string) {
	t.Helper()
	if wantIgnored {
		// The library asserts the type: an IgnoredError wrapped is a
		// failure to it.
		if _, ok := err.(*controller.IgnoredError); !ok {
			t.Errorf("err = %v, want IgnoredError", err)
		}
		return
	}
	hostpathtest.CheckErr(t, err, wantErr)
}

// TestProvisionSelectedNodeGone: the instance elected for a
// WaitForFirstConsumer claim whose selected node was deleted or runs no
// provisioner gives it back to the scheduler; any other instance ignores
// it; a pinned claim is never rescheduled. A deleted node is answered
// first, with the Node's NotFound, whatever else is wrong with the claim
// (as the library did up to v12, before it called Provision); a node
// without a provisioner after the checks of the class, after the claim's
// StorageClass (as every failure of Provision).
func TestProvisionSelectedNodeGone(t *testing.T) {
	wffc := class("wffc", storagev1.VolumeBindingWaitForFirstConsumer, nil)
	bad := class("wffc", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{"nosuch": "x"})
	tests := []struct {
		name        string
		claim       *v1.PersistentVolumeClaim
		class       *storagev1.StorageClass // wffc when nil
		elected     bool
		wantState   controller.ProvisioningState
		wantErr     string
		wantIgnored bool
	}{
		{
			name: "elected, selected node without provisioner", elected: true,
			claim:     claim("wffc", storagehelpers.AnnSelectedNode+"="+idleNode),
			wantState: controller.ProvisioningReschedule,
			wantErr:   `failed to provision volume with StorageClass "wffc": Node "` + idleNode + `", which the scheduler selected, runs no hostpath provisioner: removing volume.kubernetes.io/selected-node`,
		},
		{
			name: "elected, selected node without provisioner, bad class", elected: true,
			claim: claim("wffc", storagehelpers.AnnSelectedNode+"="+idleNode), class: bad,
			wantState: controller.ProvisioningFinished,
			wantErr:   `failed to provision volume with StorageClass "wffc": `,
		},
		{
			name: "elected, selected node deleted", elected: true,
			claim:     claim("wffc", storagehelpers.AnnSelectedNode+"=ghost"),
			wantState: controller.ProvisioningReschedule,
			wantErr:   `node "ghost" not found`,
		},
		{
			name: "elected, selected node deleted, bad class", elected: true,
			claim: claim("wffc", storagehelpers.AnnSelectedNode+"=ghost"), class: bad,
			wantState: controller.ProvisioningReschedule,
			wantErr:   `node "ghost" not found`,
		},
		{
			name:      "not elected, selected node deleted",
			claim:     claim("wffc", storagehelpers.AnnSelectedNode+"=ghost"),
			wantState: controller.ProvisioningFinished, wantIgnored: true,
		},
		{
			name:      "not elected",
			claim:     claim("wffc", storagehelpers.AnnSelectedNode+"="+idleNode),
			wantState: controller.ProvisioningFinished, wantIgnored: true,
		},
		{
			name: "elected, pinned to a node without provisioner", elected: true,
			claim:     claim("wffc", hostpathv1.AnnotationProvisionOnNode+"="+idleNode, storagehelpers.AnnSelectedNode+"="+idleNode),
			wantState: controller.ProvisioningFinished, wantIgnored: true,
		},
		{
			name: "elected, selected node with a provisioner", elected: true,
			claim:     claim("wffc", storagehelpers.AnnSelectedNode+"="+otherNode),
			wantState: controller.ProvisioningFinished, wantIgnored: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, responsibilitytest.Instances{Wins: tc.elected, On: []string{selfNode, otherNode}}, append(testNodes(), wffc)...)
			f.prov.cfg.Managers = func(node string) (VolumeManager, error) {
				t.Errorf("Managers(%q) called, want no manager call", node)
				return nil, fmt.Errorf("no manager")
			}
			class := wffc
			if tc.class != nil {
				class = tc.class
			}
			// The library passes the claim's selected-node.
			pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: class, PVName: testPVName, PVC: tc.claim,
				SelectedNodeName: tc.claim.Annotations[storagehelpers.AnnSelectedNode]})
			if pv != nil || state != tc.wantState {
				t.Errorf("Provision = %v, %s; want no PV, %s", pv, state, tc.wantState)
			}
			checkErr(t, err, tc.wantIgnored, tc.wantErr)
			if !tc.wantIgnored && !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("err = %q, want it to start with %q", err, tc.wantErr)
			}
		})
	}
}

// TestBuildPVVolumeType checks the source of a node-mode PV of either
// volume type: a local PV has spec.local (no fsType), no hostPath, the
// required node affinity a local PV must have and volumeMode Filesystem;
// setPath puts the managers' path in whichever source it has, where
// hostpathv1.VolumePath, which e2e and the tools read PVs' paths with,
// finds it.
func TestBuildPVVolumeType(t *testing.T) {
	const path = "/var/hpvolumes/d"
	affinity := &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"host-a"}}},
	}}}}
	tests := []struct {
		name  string
		local bool
		want  v1.PersistentVolumeSource
	}{
		{name: "hostPath", want: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: ptr.To(v1.HostPathDirectory)}}},
		{name: "local", local: true, want: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: path}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pv := buildPV(pvInput{name: "pv", class: class("c", storagev1.VolumeBindingWaitForFirstConsumer, nil), claim: claim("c"),
				pool: "default", dir: "d", size: resource.MustParse("1Gi"), node: "node-a", hostname: "host-a", local: tc.local})
			if got := hostpathv1.VolumePath(pv); got != "" {
				t.Errorf("path before setPath = %q, want none", got)
			}
			setPath(pv, path)
			if !equality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, tc.want) {
				t.Errorf("source = %+v, want %+v", pv.Spec.PersistentVolumeSource, tc.want)
			}
			if got := hostpathv1.VolumePath(pv); got != path {
				t.Errorf("hostpathv1.VolumePath = %q, want %q", got, path)
			}
			if !equality.Semantic.DeepEqual(pv.Spec.NodeAffinity, affinity) {
				t.Errorf("node affinity = %+v, want %+v", pv.Spec.NodeAffinity, affinity)
			}
			if pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != v1.PersistentVolumeFilesystem {
				t.Errorf("volumeMode = %v, want Filesystem", pv.Spec.VolumeMode)
			}
			if pv.Annotations[hostpathv1.AnnotationNode] != "node-a" || pv.Annotations[hostpathv1.AnnotationMode] != hostpathv1.ModeNode {
				t.Errorf("annotations = %v", pv.Annotations)
			}
		})
	}
}

func TestEnforcementOf(t *testing.T) {
	tests := []struct {
		kinds []string
		want  string
	}{
		{nil, hostpathv1.EnforcementNone},
		{[]string{""}, hostpathv1.EnforcementNone},
		{[]string{"btrfs"}, "btrfs"},
		{[]string{"btrfs", "btrfs"}, "btrfs"},
		{[]string{"xfs", "btrfs", "xfs"}, "btrfs,xfs"},
		{[]string{"btrfs", ""}, hostpathv1.EnforcementNone},
	}
	for _, tc := range tests {
		if got := enforcementOf(tc.kinds...); got != tc.want {
			t.Errorf("enforcementOf(%q) = %q, want %q", tc.kinds, got, tc.want)
		}
	}
}

// TestProvisionChecksCreated: a manager (an older one, which confirmed a
// record it found) answering the create with a volume that is not the one
// asked for (another claim namespace or mode; the fake answers another
// owner with 409, TestCheckCreated covers it) fails the provisioning for
// good, with no PV.
func TestProvisionChecksCreated(t *testing.T) {
	shared := class("shared", storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{ParamPathPattern: "${pvc.metadata.name}"})
	for _, tc := range []struct {
		desc    string
		answer  func(v *managerapi.Volume)
		wantErr string
	}{
		{desc: "another claim namespace", answer: func(v *managerapi.Volume) { v.ClaimNamespace = "evil" }, wantErr: `claim namespace "evil", not "ns"`},
		{desc: "multihost", answer: func(v *managerapi.Volume) { v.Multihost = true }, wantErr: "multihost true, not false"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, responsibilitytest.Instances{}, testNodes()...)
			f.manager.AddVolume(directory("default", "data", testPVName, "ns"))
			f.manager.UpdateVolume("default", "data", tc.answer)
			c := claim("shared", storagehelpers.AnnSelectedNode+"="+selfNode)
			pv, state, err := f.prov.Provision(ctx, controller.ProvisionOptions{StorageClass: shared, PVName: testPVName, PVC: c})
			if state != controller.ProvisioningFinished || pv != nil {
				t.Errorf("Provision = %v, %s; want no PV, finished", pv, state)
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "not the one asked for") {
				t.Errorf("err = %v, want one saying %s", err, tc.wantErr)
			}
		})
	}
}

// TestCheckCreated: a create's answer is the volume asked for when its
// owner, mode and claim namespace are the request's.
func TestCheckCreated(t *testing.T) {
	req := managerapi.CreateVolumeRequest{Owner: "pvc-1", ClaimNamespace: "ns", Multihost: true, RequiredBytes: 1 << 20}
	for _, tc := range []struct {
		desc    string
		vol     *managerapi.Volume
		wantErr string
	}{
		{desc: "the volume asked for", vol: &managerapi.Volume{Owner: "pvc-1", ClaimNamespace: "ns", Multihost: true, SizeBytes: 2 << 20}},
		{desc: "no volume", wantErr: "no volume at all"},
		{desc: "everything else", vol: &managerapi.Volume{Owner: "ghost", ClaimNamespace: "evil"},
			wantErr: `owner "ghost", not "pvc-1", multihost false, not true, claim namespace "evil", not "ns"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := checkCreated("node-b", "default", "dir", req, tc.vol)
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("checkCreated = %v", err)
				}
				return
			}
			var mismatch *volumeMismatch
			if !errors.As(err, &mismatch) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `node "node-b"`) {
				t.Errorf("checkCreated = %v, want a mismatch saying %s", err, tc.wantErr)
			}
		})
	}
}

func TestInTopologies(t *testing.T) {
	req := func(key string, values ...string) v1.TopologySelectorLabelRequirement {
		return v1.TopologySelectorLabelRequirement{Key: key, Values: values}
	}
	labels := map[string]string{"disk": "nvme", "zone": "a"}
	tests := []struct {
		name  string
		terms []v1.TopologySelectorTerm
		want  bool
	}{
		{"no term: every node", nil, true},
		{"one expression that matches", []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{req("disk", "ssd", "nvme")}}}, true},
		{"a value that differs", []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{req("disk", "ssd")}}}, false},
		{"a label the node lacks", []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{req("rack", "1")}}}, false},
		{"every expression of a term must match", []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{req("disk", "nvme"), req("zone", "b")}}}, false},
		{"a term without expressions matches no node", []v1.TopologySelectorTerm{{}}, false},
		{"one term of several is enough", []v1.TopologySelectorTerm{
			{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{req("zone", "b")}},
			{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{req("disk", "nvme"), req("zone", "a")}},
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := inTopologies(labels, tc.terms); got != tc.want {
				t.Errorf("inTopologies(%v, %s) = %v, want %v", labels, topologiesString(tc.terms), got, tc.want)
			}
		})
	}
}
