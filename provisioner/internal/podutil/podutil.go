// Package podutil holds the one rule the provisioner uses to count a peer or
// a manager pod as serving.
package podutil

import v1 "k8s.io/api/core/v1"

// Serving reports whether a pod is scheduled, not terminating and Ready.
func Serving(p *v1.Pod) bool {
	if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
