package cachetrim

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/provisioner/internal/podstub"
	"hostpath.dev/provisioner/internal/responsibility"
)

// other is the name of another provisioner.
const other = "ebs.csi.aws.com"

// configured are the names of an instance configured with a name of its
// own: hostpath's default names must still never be stubs.
var configured = hostpathv1.NewProvisionerNames("example.com/hostpath")

// claimWith returns the testdata claim with its storage-provisioner
// annotations set as keyValues says ("key=value"; "key" alone removes it).
func claimWith(t testing.TB, keyValues ...string) *v1.PersistentVolumeClaim {
	c := hostpathtest.Load[v1.PersistentVolumeClaim](t, "claim.json")
	setAnnotations(&c.ObjectMeta, keyValues)
	return c
}

// volumeWith returns the testdata PV with annotations set as keyValues
// says, like claimWith.
func volumeWith(t testing.TB, keyValues ...string) *v1.PersistentVolume {
	pv := hostpathtest.Load[v1.PersistentVolume](t, "pv.json")
	setAnnotations(&pv.ObjectMeta, keyValues)
	return pv
}

func setAnnotations(m *metav1.ObjectMeta, keyValues []string) {
	for _, kv := range keyValues {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			delete(m.Annotations, k)
			continue
		}
		m.Annotations[k] = v
	}
}

// pending makes c a claim that waits for its volume.
func pending(c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	c.Spec.VolumeName = ""
	c.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}
	delete(c.Annotations, "pv.kubernetes.io/bind-completed")
	delete(c.Annotations, "pv.kubernetes.io/bound-by-controller")
	return c
}

// volumeStubOf is what the stub of pv must be.
func volumeStubOf(pv *v1.PersistentVolume, keys ...string) *v1.PersistentVolume {
	a := map[string]string{}
	for _, k := range keys {
		a[k] = pv.Annotations[k]
	}
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion, Annotations: a}}
}

// whole is obj as the shared transform leaves it: without managedFields.
func whole(obj runtime.Object) runtime.Object {
	obj = obj.DeepCopyObject()
	m, _ := meta.Accessor(obj)
	m.SetManagedFields(nil)
	return obj
}

func TestTransform(t *testing.T) {
	gp3 := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Provisioner: other}
	handMade := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", UID: "u-by-hand", ResourceVersion: "9",
			Annotations: map[string]string{
				hostpathv1.AnnotationNode: "node-a", hostpathv1.AnnotationPool: "default", hostpathv1.AnnotationDirectory: "old-data",
				"kubectl.kubernetes.io/last-applied-configuration": `{"kind":"PersistentVolume"}`,
			}},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/hpvolumes/old-data"}},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain, StorageClassName: "manual",
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased},
	}
	hostpathCSI := volumeWith(t, storagehelpers.AnnDynamicallyProvisioned)
	hostpathCSI.Spec.CSI.Driver = hostpathv1.CapacityProvisionerName
	otherWithHostpathCSI := volumeWith(t)
	otherWithHostpathCSI.Spec.CSI.Driver = hostpathv1.CapacityProvisionerName
	for _, tc := range []struct {
		desc string
		in   runtime.Object
		// want is what Transform makes of in; nil: in, whole.
		want runtime.Object
	}{
		{desc: "claim of another provisioner: whole (Keep leaves it out of the cache)", in: claimWith(t)},
		{desc: "claim of hostpath: whole", in: claimWith(t, storagehelpers.AnnStorageProvisioner+"="+hostpathv1.DefaultProvisionerName)},
		{desc: "PV of another provisioner: stub", in: volumeWith(t), want: volumeStubOf(volumeWith(t), storagehelpers.AnnDynamicallyProvisioned)},
		{desc: "PV of another provisioner naming a directory of a pool: stub with the directory",
			in: volumeWith(t, hostpathv1.AnnotationNode+"=node-a", hostpathv1.AnnotationPool+"=default", hostpathv1.AnnotationDirectory+"=d", storagehelpers.AnnMigratedTo+"=other.example"),
			want: volumeStubOf(volumeWith(t, hostpathv1.AnnotationNode+"=node-a", hostpathv1.AnnotationPool+"=default", hostpathv1.AnnotationDirectory+"=d", storagehelpers.AnnMigratedTo+"=other.example"),
				storagehelpers.AnnDynamicallyProvisioned, hostpathv1.AnnotationNode, hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory, storagehelpers.AnnMigratedTo)},
		{desc: "PV made by hand pointing into a pool: stub with the directory", in: handMade,
			want: volumeStubOf(handMade, hostpathv1.AnnotationNode, hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory)},
		{desc: "PV of the default name: whole", in: volumeWith(t, storagehelpers.AnnDynamicallyProvisioned+"="+hostpathv1.DefaultProvisionerName)},
		{desc: "PV of the configured name: whole", in: volumeWith(t, storagehelpers.AnnDynamicallyProvisioned+"="+configured.Name())},
		{desc: "PV migrated to hostpath: whole", in: volumeWith(t, storagehelpers.AnnMigratedTo+"="+hostpathv1.CapacityProvisionerName)},
		{desc: "CSI PV of hostpath's driver without provisioned-by: whole", in: hostpathCSI},
		{desc: "PV of another provisioner with hostpath's CSI driver: whole", in: otherWithHostpathCSI},
		{desc: "StorageClass of another provisioner: the shared trim only", in: gp3},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = whole(tc.in)
			}
			transform := New(configured)
			got, err := transform(tc.in.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(want, got) {
				t.Errorf("Transform (-want +got):\n%s", diff.Diff(want, got))
			}
			again, _ := transform(got.(runtime.Object).DeepCopyObject())
			if !equality.Semantic.DeepEqual(got, again) {
				t.Errorf("Transform is not idempotent (-once +twice):\n%s", diff.Diff(got, again))
			}
			// The library's and this program's answer is the same for the
			// stub as for the object.
			if pv, ok := tc.in.(*v1.PersistentVolume); ok && responsibility.ForeignVolume(pv, configured) != responsibility.ForeignVolume(got.(*v1.PersistentVolume), configured) {
				t.Error("ForeignVolume differs between the PV and what Transform made of it")
			}
		})
	}
}

// TestStubFields checks that a PV stub has exactly the fields the package
// doc names, from a PV that has every kept field set and many more.
func TestStubFields(t *testing.T) {
	transform := New(hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName))
	pv, _ := transform(volumeWith(t, storagehelpers.AnnMigratedTo+"=other.example", hostpathv1.AnnotationNode+"=n", hostpathv1.AnnotationPool+"=p", hostpathv1.AnnotationDirectory+"=d"))
	wantPV := []string{
		"metadata.annotations[hostpath.dev/directory]", "metadata.annotations[hostpath.dev/node]",
		"metadata.annotations[hostpath.dev/pool]", "metadata.annotations[pv.kubernetes.io/migrated-to]",
		"metadata.annotations[pv.kubernetes.io/provisioned-by]",
		"metadata.name", "metadata.resourceVersion", "metadata.uid",
	}
	if got := setFields(pv); !slices.Equal(got, wantPV) {
		t.Errorf("PersistentVolume stub fields = %q, want %q", got, wantPV)
	}
}

// TestPerNodeStubFields checks that a Node, a Pod and a HostDefinition (a
// worker Node with 30 images, a manager pod, a Ready definition: testdata,
// as the API server sends them) are cached with exactly the fields
// nodeStub, podstub.Pod and definitionStub name, and that a stub made
// again is the same stub.
func TestPerNodeStubFields(t *testing.T) {
	transform := New(configured)
	node := hostpathtest.Load[v1.Node](t, "node.json")
	node.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	labels := func(m map[string]string) []string {
		var out []string
		for k := range m {
			out = append(out, "metadata.labels["+k+"]")
		}
		return out
	}
	for _, tc := range []struct {
		name string
		obj  any
		want []string
	}{
		{"node", node, append(labels(node.Labels),
			"metadata.deletionTimestamp", "metadata.name", "metadata.resourceVersion", "metadata.uid", "spec.taints")},
		{"pod", hostpathtest.Load[v1.Pod](t, "pod.json"), []string{
			"metadata.name", "metadata.namespace", "metadata.resourceVersion", "metadata.uid",
			"daemonNode", "nodeName", "podIP", "ready"}},
		{"hostdefinition", hostpathtest.Load[hostpathv1.HostDefinition](t, "hostdefinition.json"), []string{
			"metadata.name", "metadata.resourceVersion", "metadata.uid", "spec.nodeName", "spec.pool", "status.phase"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub, err := transform(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Sorted(slices.Values(tc.want))
			if got := setFields(stub); !slices.Equal(got, want) {
				t.Errorf("stub fields = %q, want %q", got, want)
			}
			if again, _ := transform(stub); !equality.Semantic.DeepEqual(again, stub) {
				t.Errorf("the stub of a stub differs:\n%s", diff.Diff(stub, again))
			}
		})
	}
}

// setFields lists, sorted, the JSON paths of the fields of obj that are set:
// a map's keys each, a slice or a struct of another package (a time) as
// one field.
func setFields(obj any) []string {
	var out []string
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				out = append(out, fmt.Sprintf("%s[%v]", path, k))
			}
		case reflect.Struct:
			if pkg := v.Type().PkgPath(); !strings.HasPrefix(pkg, "k8s.io/api") && !strings.HasPrefix(pkg, "k8s.io/apimachinery/pkg/apis") &&
				!strings.HasPrefix(pkg, "hostpath.dev/api/hostpath") && pkg != "hostpath.dev/provisioner/internal/podstub" {
				if !v.IsZero() {
					out = append(out, path)
				}
				return
			}
			for i := range v.NumField() {
				f := v.Type().Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				p := path
				if name != "" {
					p = strings.TrimPrefix(path+"."+name, ".")
				}
				walk(v.Field(i), p)
			}
		default:
			if !v.IsZero() {
				out = append(out, path)
			}
		}
	}
	walk(reflect.ValueOf(obj), "")
	slices.Sort(out)
	return out
}

// TestTransformNodesAndPods checks the provisioner's stubs of the other
// kinds it caches: a Node and a Pod (as a podstub.Pod) keep what it reads
// of them, with their values, and nothing else.
func TestTransformNodesAndPods(t *testing.T) {
	transform := New(configured)
	gone := metav1.Now()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "un", ResourceVersion: "3", Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{"big": "x"}, DeletionTimestamp: &gone},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "t", Effect: v1.TaintEffectNoSchedule}}, PodCIDR: "10.0.0.0/24"}, Status: v1.NodeStatus{Phase: v1.NodeRunning}}
	wantNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "un", ResourceVersion: "3", Labels: map[string]string{"a": "b"}, DeletionTimestamp: &gone},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "t", Effect: v1.TaintEffectNoSchedule}}}}
	if got, err := transform(node.DeepCopy()); err != nil || !equality.Semantic.DeepEqual(got, wantNode) {
		t.Errorf("Transform(Node) (-want +got):\n%s", diff.Diff(wantNode, got))
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{"a": "b"}, DeletionTimestamp: &gone},
		Spec: v1.PodSpec{NodeName: "n", ServiceAccountName: "sa", Tolerations: []v1.Toleration{{Key: "k"}},
			Containers: []v1.Container{{Name: "c"}}, InitContainers: []v1.Container{{Name: "i"}}, Volumes: []v1.Volume{{Name: "v"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "198.18.1.9", Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: gone}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true}}},
	}
	wantPod := &podstub.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &gone},
		NodeName:   "n", PodIP: "198.18.1.9",
	}
	if got, err := transform(pod); err != nil || !equality.Semantic.DeepEqual(got, wantPod) {
		t.Errorf("Transform(Pod) (-want +got):\n%s", diff.Diff(wantPod, got))
	}
	for _, obj := range []any{nil, "text"} {
		if got, err := transform(obj); err != nil || !reflect.DeepEqual(got, obj) {
			t.Errorf("Transform(%#v) = %#v, %v; want it unchanged", obj, got, err)
		}
	}
}
