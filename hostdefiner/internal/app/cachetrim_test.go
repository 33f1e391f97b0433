package app

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/runtime/component"
)

func TestCacheTrim(t *testing.T) {
	node := hostpathtest.Load[v1.Node](t, "node.json")
	pod := hostpathtest.Load[v1.Pod](t, "pod.json")
	for _, tc := range []struct {
		desc string
		obj  runtime.Object
		// want changes a copy of obj into what cacheTrim should make of it.
		want func(runtime.Object)
	}{
		{desc: "Node: status dropped, metadata and spec kept", obj: node, want: func(o runtime.Object) {
			n := o.(*v1.Node)
			n.ManagedFields, n.Status = nil, v1.NodeStatus{}
		}},
		{desc: "Pod: containers, their statuses and volumes dropped", obj: pod, want: func(o runtime.Object) {
			p := o.(*v1.Pod)
			p.ManagedFields = nil
			p.Spec.Containers, p.Spec.InitContainers, p.Spec.EphemeralContainers, p.Spec.Volumes = nil, nil, nil, nil
			p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			want := tc.obj.DeepCopyObject()
			tc.want(want)
			got, err := cacheTrim(tc.obj.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(want, got) {
				t.Errorf("cacheTrim (-want +got):\n%s", diff.Diff(want, got))
			}
			again, _ := cacheTrim(got.(runtime.Object).DeepCopyObject())
			if !equality.Semantic.DeepEqual(got, again) {
				t.Errorf("cacheTrim is not idempotent (-once +twice):\n%s", diff.Diff(got, again))
			}
		})
	}
}

// TestCacheTrimKeepsWhatIsRead reads a trimmed Node and Pod the way the
// host definer does, and gets what the whole object gives.
func TestCacheTrimKeepsWhatIsRead(t *testing.T) {
	node := hostpathtest.Load[v1.Node](t, "node.json")
	pod := hostpathtest.Load[v1.Pod](t, "pod.json")
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
		{"Node taints (placement)", node, func(o runtime.Object) any { return o.(*v1.Node).Spec.Taints }},
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
			trimmed, _ := cacheTrim(r.obj.DeepCopyObject())
			whole, got := r.read(r.obj), r.read(trimmed.(runtime.Object))
			if !reflect.DeepEqual(whole, got) {
				t.Errorf("read differs after cacheTrim (-whole +trimmed):\n%s", diff.Diff(whole, got))
			}
		})
	}
}
