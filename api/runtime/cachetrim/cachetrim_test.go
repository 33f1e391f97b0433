package cachetrim

import (
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
)

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

// TestTransform: without rules, every object keeps all but managedFields,
// which become nil.
func TestTransform(t *testing.T) {
	for _, tc := range []struct {
		desc string
		obj  runtime.Object
	}{
		{desc: "Node without a rule: kept whole", obj: &v1.Node{ObjectMeta: meta0("n"), Status: v1.NodeStatus{Phase: v1.NodeRunning}}},
		{desc: "Pod without a rule: kept whole", obj: &v1.Pod{ObjectMeta: meta0("p"),
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}, Status: v1.PodStatus{PodIP: "10.0.0.1"}}},
		{desc: "PersistentVolumeClaim: kept whole", obj: &v1.PersistentVolumeClaim{ObjectMeta: meta0("c"),
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}},
		{desc: "PersistentVolume: kept whole", obj: &v1.PersistentVolume{ObjectMeta: meta0("pv"),
			Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/p"}}}}},
		{desc: "StorageClass: kept whole", obj: &storagev1.StorageClass{ObjectMeta: meta0("sc"), Provisioner: "p", Parameters: map[string]string{"pool": "x"}}},
		{desc: "DaemonSet: kept whole", obj: &appsv1.DaemonSet{ObjectMeta: meta0("ds"),
			Spec: appsv1.DaemonSetSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}}}},
		{desc: "CertificateSigningRequest: kept whole", obj: &certv1.CertificateSigningRequest{ObjectMeta: meta0("csr"),
			Spec: certv1.CertificateSigningRequestSpec{Request: []byte("req")}, Status: certv1.CertificateSigningRequestStatus{Certificate: []byte("cert")}}},
		{desc: "Secret: kept whole", obj: &v1.Secret{ObjectMeta: meta0("s"), Data: map[string][]byte{"k": []byte("v")}}},
		{desc: "ConfigMap: kept whole", obj: &v1.ConfigMap{ObjectMeta: meta0("cm"), Data: map[string]string{"k": "v"}}},
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
			transform := Transform()
			got, err := transform(tc.obj.DeepCopyObject())
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
			again, _ := transform(got.(runtime.Object).DeepCopyObject())
			if !equality.Semantic.DeepEqual(got, again) {
				t.Errorf("Transform is not idempotent (-once +twice):\n%s", diff.Diff(got, again))
			}
		})
	}
}

func TestTransformLeavesNonObjects(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: &v1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: managed}}}
	transform := Transform(For(func(p *v1.Pod) *v1.Pod { return &v1.Pod{} }))
	for _, obj := range []any{nil, "text", tomb} {
		got, err := transform(obj)
		if err != nil || !reflect.DeepEqual(got, obj) {
			t.Errorf("Transform(%#v) = %#v, %v; want it unchanged", obj, got, err)
		}
	}
}

// TestRules checks that a rule applies to the objects of its type only,
// after managedFields went, that what it returns is what is cached (a
// stub in place of the object), and that the first rule of a type wins.
func TestRules(t *testing.T) {
	stub := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "stub"}}
	var seen []metav1.ManagedFieldsEntry
	transform := Transform(
		For(func(n *v1.Node) *v1.Node {
			seen = n.ManagedFields
			n.Status = v1.NodeStatus{}
			return n
		}),
		For(func(*v1.PersistentVolume) *v1.PersistentVolume { return stub }),
		For(func(*v1.PersistentVolume) *v1.PersistentVolume { t.Error("the second rule of a type ran"); return nil }),
	)
	node := &v1.Node{ObjectMeta: meta0("n"), Spec: v1.NodeSpec{Unschedulable: true}, Status: v1.NodeStatus{Phase: v1.NodeRunning}}
	want := &v1.Node{ObjectMeta: meta0("n"), Spec: v1.NodeSpec{Unschedulable: true}}
	want.ManagedFields = nil
	got, err := transform(node)
	if err != nil || got != node {
		t.Errorf("Node: got %p, %v; want the object %p, changed in place", got, err, node)
	}
	if seen != nil {
		t.Errorf("the Node rule saw managedFields %v, want them gone first", seen)
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("Node (-want +got):\n%s", diff.Diff(want, got))
	}
	if got, err := transform(&v1.PersistentVolume{ObjectMeta: meta0("pv")}); err != nil || got != stub {
		t.Errorf("PersistentVolume: got %#v, %v; want the stub the rule returned", got, err)
	}
	cm := &v1.ConfigMap{ObjectMeta: meta0("cm"), Data: map[string]string{"k": "v"}}
	if got, err := transform(cm); err != nil || got != cm || cm.Data["k"] != "v" {
		t.Errorf("ConfigMap: got %#v, %v; want the object, all but managedFields kept", got, err)
	}
}

// TestTransformAllocatesNothing: informers run the transform on every
// object they list or watch.
func TestTransformAllocatesNothing(t *testing.T) {
	transform := Transform(For(func(n *v1.Node) *v1.Node { n.Status = v1.NodeStatus{}; return n }))
	node, cm := &v1.Node{ObjectMeta: meta0("n")}, &v1.ConfigMap{ObjectMeta: meta0("cm")}
	if n := testing.AllocsPerRun(100, func() {
		node.ManagedFields, cm.ManagedFields = managed, managed
		_, _ = transform(node)
		_, _ = transform(cm)
	}); n != 0 {
		t.Errorf("Transform allocates %v times per two objects, want 0", n)
	}
}
