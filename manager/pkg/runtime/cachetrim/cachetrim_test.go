package cachetrim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/tools/cache"

	"hostpath.dev/manager/pkg/runtime/component"
)

// load decodes testdata/name into a new T: a worker Node with 30 images
// and the manager's pod (manifests/base/manager/daemonset.yaml), as the
// API server returns them.
func load[T any](t testing.TB, name string) *T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	obj := new(T)
	if err := json.Unmarshal(b, obj); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return obj
}

// managed are the managedFields of a small object.
var managed = []metav1.ManagedFieldsEntry{{
	Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
	FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:a":{}}}}`),
}}

// meta0 is the metadata of the small objects, managedFields included.
func meta0(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("u-" + name), ResourceVersion: "7",
		Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"},
		Finalizers: []string{"f"}, ManagedFields: managed}
}

func TestTransform(t *testing.T) {
	node := load[v1.Node](t, "node.json")
	pod := load[v1.Pod](t, "pod.json")
	for _, tc := range []struct {
		desc string
		obj  runtime.Object
		// want changes a copy of obj into what Transform should make of
		// it; nil: only managedFields go.
		want func(runtime.Object)
	}{
		{desc: "Node: status dropped, metadata and spec kept", obj: node, want: func(o runtime.Object) {
			o.(*v1.Node).Status = v1.NodeStatus{}
		}},
		{desc: "Pod: containers, their statuses and volumes dropped", obj: pod, want: func(o runtime.Object) {
			p := o.(*v1.Pod)
			p.Spec.Containers, p.Spec.InitContainers, p.Spec.EphemeralContainers, p.Spec.Volumes = nil, nil, nil, nil
			p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
		}},
		{desc: "PersistentVolumeClaim: updated by the library, kept whole", obj: &v1.PersistentVolumeClaim{ObjectMeta: meta0("c"),
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}},
		{desc: "PersistentVolume: kept whole", obj: &v1.PersistentVolume{ObjectMeta: meta0("pv"),
			Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/p"}}}}},
		{desc: "StorageClass: kept whole", obj: &storagev1.StorageClass{ObjectMeta: meta0("sc"), Provisioner: "p", Parameters: map[string]string{"pool": "x"}}},
		{desc: "DaemonSet: kept whole", obj: &appsv1.DaemonSet{ObjectMeta: meta0("ds"),
			Spec: appsv1.DaemonSetSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}}}},
		{desc: "CertificateSigningRequest: status updated, kept whole", obj: &certv1.CertificateSigningRequest{ObjectMeta: meta0("csr"),
			Spec: certv1.CertificateSigningRequestSpec{Request: []byte("req")}, Status: certv1.CertificateSigningRequestStatus{Certificate: []byte("cert")}}},
		{desc: "Secret: updated, kept whole", obj: &v1.Secret{ObjectMeta: meta0("s"), Data: map[string][]byte{"k": []byte("v")}}},
		{desc: "ConfigMap: updated, kept whole", obj: &v1.ConfigMap{ObjectMeta: meta0("cm"), Data: map[string]string{"k": "v"}}},
		{desc: "any other object (a HostDefinition, say): kept whole", obj: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "hostpath.dev/v1", "kind": "HostDefinition",
			"metadata": map[string]any{"name": "n.p", "managedFields": []any{map[string]any{"manager": "m", "operation": "Update"}}},
			"spec":     map[string]any{"nodeName": "n", "pool": "p"},
		}}},
		{desc: "empty managedFields become nil", obj: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ManagedFields: []metav1.ManagedFieldsEntry{}}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if m, _ := meta.Accessor(tc.obj); m.GetManagedFields() == nil {
				t.Fatal("the input has no managedFields to drop")
			}
			want := tc.obj.DeepCopyObject()
			m, _ := meta.Accessor(want)
			m.SetManagedFields(nil)
			if tc.want != nil {
				tc.want(want)
			}
			got, err := Transform(tc.obj.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(want, got) {
				t.Errorf("Transform (-want +got):\n%s", diff.Diff(want, got))
			}
			// nil, not empty: an Update of the cached object must leave
			// the server's managedFields as they are.
			if m, _ := meta.Accessor(got); m.GetManagedFields() != nil {
				t.Errorf("managedFields = %#v, want nil", m.GetManagedFields())
			}
			again, _ := Transform(got.(runtime.Object).DeepCopyObject())
			if !equality.Semantic.DeepEqual(got, again) {
				t.Errorf("Transform is not idempotent (-once +twice):\n%s", diff.Diff(got, again))
			}
		})
	}
}

func TestTransformLeavesNonObjects(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: &v1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed}}}
	for _, obj := range []any{nil, "text", tomb} {
		got, err := Transform(obj)
		if err != nil || !reflect.DeepEqual(got, obj) {
			t.Errorf("Transform(%#v) = %#v, %v; want it unchanged", obj, got, err)
		}
	}
}

// TestTransformKeepsWhatIsRead reads a trimmed Node and Pod the way the
// provisioner, the host definer and the library do, and gets what the
// whole object gives.
func TestTransformKeepsWhatIsRead(t *testing.T) {
	node := load[v1.Node](t, "node.json")
	pod := load[v1.Pod](t, "pod.json")
	for _, r := range []struct {
		desc string
		obj  runtime.Object
		read func(runtime.Object) any
	}{
		{"Node name and UID (events, keys, node affinity's metadata.name)", node, func(o runtime.Object) any {
			n := o.(*v1.Node)
			return []any{n.Name, n.UID, n.ResourceVersion}
		}},
		{"Node labels (kubernetes.io/hostname, hostpath.dev/avoid-deletion, node affinity)", node, func(o runtime.Object) any { return o.(*v1.Node).Labels }},
		{"Node annotations", node, func(o runtime.Object) any { return o.(*v1.Node).Annotations }},
		{"Node taints (host definer's placement)", node, func(o runtime.Object) any { return o.(*v1.Node).Spec.Taints }},
		{"Pod metadata (labels, UID, deletionTimestamp, owner)", pod, func(o runtime.Object) any {
			p := o.(*v1.Pod)
			return []any{p.Name, p.Namespace, p.UID, p.Labels, p.DeletionTimestamp, p.OwnerReferences}
		}},
		{"Pod serving (component.PodServing: nodeName, deletionTimestamp, Ready)", pod, func(o runtime.Object) any { return component.PodServing(o.(*v1.Pod)) }},
		{"Pod IP (manager URL)", pod, func(o runtime.Object) any { return o.(*v1.Pod).Status.PodIP }},
		{"Pod service account and phase (CSR approver)", pod, func(o runtime.Object) any {
			p := o.(*v1.Pod)
			return []any{p.Spec.ServiceAccountName, p.Status.Phase}
		}},
	} {
		t.Run(r.desc, func(t *testing.T) {
			trimmed, _ := Transform(r.obj.DeepCopyObject())
			whole, got := r.read(r.obj), r.read(trimmed.(runtime.Object))
			if !reflect.DeepEqual(whole, got) {
				t.Errorf("read differs after Transform (-whole +trimmed):\n%s", diff.Diff(whole, got))
			}
		})
	}
}
