// Package cachetrim is how a hostpath program trims what its informers
// keep: Transform turns the program's own Rules into the transform set on
// its informer factories (informers.WithTransform), which changes each
// object before it is cached or handed to an event handler.
//
// This package is the mechanism, and two rules (NodeStatus, PodContainers)
// that the host definer chooses; the provisioner, which keeps less of a
// Node and a Pod, caches stubs of its own. What a program drops is its trim list, in
// its own internal/app, beside the code that reads the objects: the
// provisioner's in provisioner/internal/app/cachetrim, the host definer's
// in hostdefiner/internal/app (cachetrim.go). A program that starts
// reading a field changes its own list, nothing here.
//
// # What every transform drops
//
// From every object, metadata.managedFields: nothing reads it, and it is
// often the largest part of a small object. It becomes nil, never an empty
// list: an Update (PUT) of a cached object without managedFields leaves
// the server's as they are, while an empty list would reset them.
//
// # Rules
//
// A Rule (For) trims the objects of one Go type, after managedFields went:
// it changes the object in place (the informer's own decoded copy, which
// client-go allows a transform to change) or returns a new, smaller one of
// the same type in its place (a stub); a Rule of Into caches a record of
// another type in its place. A rule must be idempotent, as
// client-go asks of a transform, and must keep every field its program, or
// a library it runs, reads: a dropped field reads as empty, with no error.
// It must drop nothing from a kind its program updates with the cached
// object (an Update would erase on the server what the cache dropped).
// Objects of a type without a rule keep all but managedFields.
package cachetrim

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// Rule trims the objects of one type (see the package doc); For makes one.
type Rule struct {
	apply func(obj any) (any, bool)
}

// For returns the Rule for objects of type *T: trim changes one in place
// and returns it, or returns a new *T to cache in its place.
func For[T any](trim func(*T) *T) Rule {
	return Rule{apply: func(obj any) (any, bool) {
		o, ok := obj.(*T)
		if !ok {
			return obj, false
		}
		return trim(o), true
	}}
}

// Into returns the Rule for objects of type *T that caches, in place of
// each, the *S that convert makes of it: a record of the program's own
// type, smaller than any *T (whose empty struct may be most of a stub).
// S must be an object with metadata (its informer keys and indexes it by
// them) and a runtime.Object, and convert must keep the name, namespace,
// UID and resourceVersion. The informer then holds no *T, so its typed
// lister finds nothing: the program reads its objects from the informer's
// indexer, and its event handlers get *S. Idempotent: a *S is no *T.
func Into[T, S any](convert func(*T) *S) Rule {
	return Rule{apply: func(obj any) (any, bool) {
		o, ok := obj.(*T)
		if !ok {
			return obj, false
		}
		return convert(o), true
	}}
}

// Transform returns the informers' transform of a program with rules, at
// most one per type (the first of a type applies): it drops every object's
// managedFields, then applies the rule of the object's type. It never
// fails; what is not an object with metadata is returned as it is. It
// allocates nothing itself and may run on several informers at once if
// the rules may.
func Transform(rules ...Rule) cache.TransformFunc {
	return func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		for _, r := range rules {
			if trimmed, ok := r.apply(obj); ok {
				return trimmed, nil
			}
		}
		return obj, nil
	}
}

// NodeStatus is the Rule of a program that reads a Node's name, labels
// and spec.taints only (node affinity matches labels and metadata.name)
// and never writes a Node, as the host definer: it
// drops all of the Node's status (images, conditions, addresses,
// capacity, allocatable, nodeInfo, volumesInUse, volumesAttached, ...).
// Metadata and spec are kept whole.
var NodeStatus = For(func(n *v1.Node) *v1.Node {
	n.Status = v1.NodeStatus{}
	return n
})

// PodContainers is the Rule of a program that reads a Pod's metadata,
// spec.nodeName, spec.serviceAccountName, status.phase, status.conditions
// and status.podIP, and never writes a Pod, as the host definer: it drops
// the containers (init and ephemeral too), their statuses and the volumes.
// The rest of spec and status is small and kept.
var PodContainers = For(func(p *v1.Pod) *v1.Pod {
	p.Spec.Containers, p.Spec.InitContainers, p.Spec.EphemeralContainers, p.Spec.Volumes = nil, nil, nil, nil
	p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
	return p
})
