package auth

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
)

// binding is what a token is bound to, from TokenReview's extra: a pod
// (name and UID) and its node, a Node alone, or nothing.
type binding struct {
	pod, podUID, node string
}

// bindingOf reads u's extra; a key given more than once counts as absent.
func bindingOf(u *review.User) binding {
	one := func(key string) string {
		if v := u.Extra[key]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	return binding{pod: one(managerapi.ExtraPodName), podUID: one(managerapi.ExtraPodUID), node: one(managerapi.ExtraNodeName)}
}

// String describes the binding for messages.
func (b binding) String() string {
	switch {
	case b.pod != "" && b.node != "":
		return fmt.Sprintf("a token bound to pod %q on node %q", b.pod, b.node)
	case b.pod != "":
		return fmt.Sprintf("a token bound to pod %q", b.pod)
	case b.node != "":
		return fmt.Sprintf("a token bound to node %q", b.node)
	}
	return "a token bound to no pod"
}

// scope decides how far the write attrs of u reaches (steps 1 to 4 of the
// package doc), once the route's own permission is granted.
func (r *Reviewer) scope(ctx context.Context, caller review.Caller, u *review.User, attrs Attributes) (*Decision, error) {
	b := bindingOf(u)
	if b.pod == "" && b.node == "" {
		admin := Attributes{Verb: attrs.Verb, Resource: managerapi.ResourceHosts, Subresource: managerapi.SubresourceAdmin, Name: r.opts.NodeName}
		why := fmt.Sprintf("%s (`kubectl create token` without --bound-object-kind) may read, and write only as an admin; ", b)
		if err := r.authorize(ctx, caller, u, need{attrs: admin, why: why, role: managerapi.AdminClusterRole}); err != nil {
			return nil, err
		}
		return &Decision{User: u}, nil
	}
	if b.pod != "" {
		node, err := r.livePod(ctx, u, b)
		if err != nil {
			return nil, err
		}
		b.node = node
	}
	if b.node == r.opts.NodeName || !attrs.volumeWrite() {
		return &Decision{User: u}, nil
	}
	multihost := Attributes{Verb: attrs.Verb, Resource: managerapi.ResourcePools, Subresource: managerapi.SubresourceMultihostVolumes, Name: attrs.Name}
	why := fmt.Sprintf("%s calls node %q's manager: a node changes node-mode volumes only through its own manager, and another node's multihost volumes only with the following permission; ",
		b, r.opts.NodeName)
	if err := r.authorize(ctx, caller, u, need{attrs: multihost, why: why, role: managerapi.ClientClusterRole}); err != nil {
		return nil, err
	}
	return &Decision{User: u, Remote: b.node}, nil
}

// podState is what a GET found of a caller's pod: its node when it is
// live, else why not.
type podState struct {
	node string
	err  *review.Error
}

// livePod returns the node of the pod b binds u's token to, when the pod
// is live: it exists in the service account's namespace with the token's
// UID and service account, is scheduled (on the token's node, when the
// token names one) and has not finished. Otherwise it returns a Forbidden
// *Error saying why; another error when the pod cannot be read. What the
// GET finds is cached for Options.PodTTL.
func (r *Reviewer) livePod(ctx context.Context, u *review.User, b binding) (string, error) {
	ns, sa, ok := review.ServiceAccountOf(u.Name)
	if !ok || b.podUID == "" {
		return "", &review.Error{Reason: managerapi.ReasonForbidden, Message: fmt.Sprintf(
			"user %q holds %s, but is not a service account or the token names no pod UID: a bound pod cannot be checked", u.Name, b)}
	}
	key := ns + "/" + b.pod + "/" + b.podUID
	if v, ok := r.livePods.Get(key); ok {
		st := v.(podState)
		return st.node, errorOrNil(st.err)
	}
	pod, err := r.pods(ns).Get(ctx, b.pod, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return "", &review.Error{Reason: managerapi.ReasonForbidden, Message: fmt.Sprintf(
			"user %q holds %s, which the manager cannot check: its service account may not get pods in namespace %q (grant it get pods there): %v", u.Name, b, ns, err)}
	case apierrors.IsNotFound(err):
		pod = nil // a clientset answers an empty pod with the error
	case err != nil:
		return "", fmt.Errorf("get pod %s/%s, which the token of %q is bound to: %w", ns, b.pod, u.Name, err)
	}
	st := podState{node: nodeOfPod(pod)}
	if why := deadPod(pod, b, sa); why != "" {
		st = podState{err: &review.Error{Reason: managerapi.ReasonForbidden, Message: fmt.Sprintf(
			"user %q holds %s in namespace %q, but %s: a token is worth a write only while its pod is live", u.Name, b, ns, why)}}
		klog.FromContext(ctx).V(3).Info("Token of a pod that is not live", "user", u.Name, "pod", klog.KRef(ns, b.pod), "reason", why)
	}
	r.livePods.Add(key, st, r.opts.PodTTL)
	return st.node, errorOrNil(st.err)
}

// nodeOfPod is pod's node; "" for no pod.
func nodeOfPod(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.Spec.NodeName
}

// deadPod says why pod (nil when the GET found none) is not the live pod
// b binds a token of service account sa to; "" when it is.
func deadPod(pod *corev1.Pod, b binding, sa string) string {
	switch {
	case pod == nil:
		return "the pod no longer exists"
	case string(pod.UID) != b.podUID:
		return fmt.Sprintf("the pod of that name is another one now (UID %s, the token's %s): the token's pod is gone", pod.UID, b.podUID)
	case pod.Spec.ServiceAccountName != sa:
		return fmt.Sprintf("the pod runs as service account %q, not %q", pod.Spec.ServiceAccountName, sa)
	case pod.Spec.NodeName == "":
		return "the pod is not scheduled to a node"
	case b.node != "" && pod.Spec.NodeName != b.node:
		return fmt.Sprintf("the pod is on node %q, not on the token's", pod.Spec.NodeName)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return fmt.Sprintf("the pod has finished (phase %s)", pod.Status.Phase)
	}
	return ""
}

// errorOrNil returns e as an error, nil when e is nil (a nil *Error in an
// error interface is not nil).
func errorOrNil(e *review.Error) error {
	if e == nil {
		return nil
	}
	return e
}
