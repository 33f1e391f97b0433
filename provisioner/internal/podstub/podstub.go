// Package podstub is what the provisioner keeps of the pods it caches: the
// pods of the provisioner instances (the election, package
// responsibility) and of the managers (package managers). Every instance
// keeps one of each for every node of the cluster, so these pods are the
// part of its memory that grows with the number of nodes
// (docs/scale.md, "Memory per node").
//
// A Pod is a struct of its own, not a *v1.Pod with fields dropped: a
// v1.Pod, however empty, is 1,240 bytes before its maps and slices, and a
// stub kept as one took 2,336 bytes of heap, a Pod 440
// (BenchmarkPerNodeCache in provisioner/internal/app/cachetrim); a Pod
// keeps the metadata an informer needs (but the labels) and the four
// fields the provisioner reads besides. The informers
// of those pods cache Pods in place of *v1.Pods (the transform of
// provisioner/internal/app/cachetrim, with From), so their typed listers
// must not be used: they would find no *v1.Pod. Read them with a Lister,
// or from the informer's indexer with an index of IndexByNodeName, and Of
// in event handlers.
package podstub

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Pod is what the provisioner keeps of a pod. The election (package
// responsibility) reads the node, the deletion and the readiness of the
// instances' pods; the app the node of an instance's pod that comes or
// goes (Node: for a pod not scheduled yet, the node its DaemonSet's
// affinity names) and whether a manager pod became Ready; the managers'
// resolver the node, deletion, readiness and IP of the managers' pods.
// Nothing else of a pod is kept: its labels (488 of the 928 bytes a Pod
// took with them), annotations, owners, containers, volumes, tolerations,
// the rest of its affinity, its other conditions, its phase and service
// account, and its container statuses. No reader needs the labels: each
// pod informer asks the API server only for the pods of its selector
// (--instance-selector, --manager-selector), and a pod whose labels stop
// matching leaves its cache by a deletion, so a cache holds no other pod.
type Pod struct {
	// ObjectMeta holds the pod's name, namespace, UID, resourceVersion and
	// deletionTimestamp, what the informer keys and indexes it by and what
	// the readers look at; nothing else of it is set.
	metav1.ObjectMeta `json:"metadata"`
	// NodeName is spec.nodeName: "" while the pod is not scheduled.
	NodeName string `json:"nodeName,omitempty"`
	// DaemonNode is the node that the pod's required node affinity names
	// by metadata.name, as the DaemonSet controller writes it for each of
	// its pods: "" when none does.
	DaemonNode string `json:"daemonNode,omitempty"`
	// PodIP is status.podIP.
	PodIP string `json:"podIP,omitempty"`
	// Ready says that the pod's Ready condition is True.
	Ready bool `json:"ready,omitempty"`
}

var _ runtime.Object = &Pod{}

// From returns what the provisioner keeps of p.
func From(p *v1.Pod) *Pod {
	s := &Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp},
		NodeName:   p.Spec.NodeName,
		DaemonNode: daemonNode(p),
		PodIP:      p.Status.PodIP,
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			s.Ready = c.Status == v1.ConditionTrue
			break
		}
	}
	return s
}

// daemonNode is the node that p's required node affinity names by
// metadata.name with a single value, in the first term that does; "" for
// none.
func daemonNode(p *v1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == v1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// Serving reports whether the pod counts as serving: scheduled, not
// terminating, and Ready (component.PodServing of the pod it was made
// from).
func (p *Pod) Serving() bool {
	return p.NodeName != "" && p.DeletionTimestamp == nil && p.Ready
}

// Node is the node of the pod: the one it is scheduled to, else the one
// its DaemonSet's node affinity names, else "".
func (p *Pod) Node() string {
	if p.NodeName != "" {
		return p.NodeName
	}
	return p.DaemonNode
}

// GetObjectKind is part of runtime.Object: a Pod carries no kind.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is part of runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// Of returns the Pod of an informer's event: the object itself, or the
// last state a tombstone (cache.DeletedFinalStateUnknown) holds; false for
// anything else.
func Of(obj any) (*Pod, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*Pod)
	return p, ok
}

// IndexByNodeName is the index function of hostpathv1.NodeNameIndex for a
// cache of Pods: the node a Pod is scheduled to; nothing for a Pod not
// scheduled yet or an object of another type.
func IndexByNodeName(obj any) ([]string, error) {
	if p, ok := obj.(*Pod); ok && p.NodeName != "" {
		return []string{p.NodeName}, nil
	}
	return nil, nil
}

// Lister lists the Pods of one namespace of a cache of Pods (an
// informer's indexer with the namespace index, as a typed informer has):
// every one, since the informer holds only the pods of its selector.
type Lister struct {
	indexer   cache.Indexer
	namespace string
}

// NewLister returns the Lister of the Pods of namespace in indexer.
func NewLister(indexer cache.Indexer, namespace string) Lister {
	return Lister{indexer: indexer, namespace: namespace}
}

// List returns the Pods of the namespace.
func (l Lister) List() ([]*Pod, error) {
	var pods []*Pod
	err := cache.ListAllByNamespace(l.indexer, l.namespace, labels.Everything(), func(obj any) {
		if p, ok := obj.(*Pod); ok {
			pods = append(pods, p)
		}
	})
	return pods, err
}
