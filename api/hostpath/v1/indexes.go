package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Index names and index functions (client-go's cache.IndexFunc) of the
// informer caches that the host definer and the provisioner look up by
// node or by pool instead of listing them whole: the manager pods of a node,
// the HostDefinitions of a node or of a pool. Both programs import this
// package, so they are defined here once.
const (
	// NodeNameIndex indexes pods and HostDefinitions by spec.nodeName
	// (IndexByNodeName).
	NodeNameIndex = "spec.nodeName"
	// PoolIndex indexes HostDefinitions by spec.pool (IndexByPool).
	PoolIndex = "spec.pool"
)

// IndexByNodeName is the index function of NodeNameIndex: the node name of
// a pod or a HostDefinition; nothing for an object without one (a pod not
// scheduled yet) or of another type.
func IndexByNodeName(obj any) ([]string, error) {
	var node string
	switch o := obj.(type) {
	case *corev1.Pod:
		node = o.Spec.NodeName
	case *HostDefinition:
		node = o.Spec.NodeName
	}
	if node == "" {
		return nil, nil
	}
	return []string{node}, nil
}

// IndexByPool is the index function of PoolIndex: the pool of a
// HostDefinition; nothing for an object of another type.
func IndexByPool(obj any) ([]string, error) {
	if d, ok := obj.(*HostDefinition); ok && d.Spec.Pool != "" {
		return []string{d.Spec.Pool}, nil
	}
	return nil, nil
}
