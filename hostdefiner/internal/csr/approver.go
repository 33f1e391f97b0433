package csr

import (
	"context"
	"fmt"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/worker"
)

// PodCacheGrace is how long after a CSR's creation a pod that the pod
// cache does not hold is looked for again before the CSR is denied: a
// manager pod's CSR can come before the pod's own event.
const PodCacheGrace = 30 * time.Second

// Approver approves the CSRs of managerapi.SignerName that a live manager pod
// made for its own node, and denies the others (see the package doc).
type Approver struct {
	base
	csrs certlisters.CertificateSigningRequestLister
	pods corelisters.PodNamespaceLister
}

// NewApprover returns an Approver reading inf.CSRs and inf.Pods; it
// registers its event handler on inf.CSRs.
func NewApprover(cfg Config, kube kubernetes.Interface, inf Informers, clk clock.Clock) (*Approver, error) {
	a := &Approver{
		base: base{cfg: cfg, kube: kube, clock: clk},
		csrs: certlisters.NewCertificateSigningRequestLister(inf.CSRs.GetIndexer()),
		pods: corelisters.NewPodLister(inf.Pods.GetIndexer()).Pods(cfg.Namespace),
	}
	a.queue = worker.NewQueue("csr-approver", a.Sync)
	synced, err := onCSRs(inf.CSRs, func(name string) { a.queue.Add(name) })
	if err != nil {
		return nil, err
	}
	a.synced = []cache.InformerSynced{synced, inf.Pods.HasSynced}
	return a, nil
}

// Sync approves or denies the CSR name when it is of our signer and
// undecided.
func (a *Approver) Sync(ctx context.Context, name string) error {
	csr, err := a.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := ours(csr); !ok || hasCondition(csr, certv1.CertificateApproved) || hasCondition(csr, certv1.CertificateDenied) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("csr", name)
	message, no, wait := a.review(csr)
	if wait > 0 {
		logger.V(2).Info("The CSR's pod is not in the cache yet: looking again", "after", wait)
		a.queue.AddAfter(name, wait)
		return nil
	}
	typ, reason := certv1.CertificateApproved, ReasonApproved
	if no != nil {
		typ, reason, message = certv1.CertificateDenied, no.reason, no.message
	}
	_, err = a.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name,
		withCondition(csr, typ, reason, message, a.clock.Now()), metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s CSR %s: %w", typ, name, err)
	}
	if no != nil {
		logger.Info("Denied a CSR", "reason", reason, "message", message, "username", csr.Spec.Username)
	} else {
		logger.Info("Approved a CSR", "message", message)
	}
	return nil
}

// review returns the approval message of csr, or why it is refused, or how
// long to wait for its pod to reach the cache.
func (a *Approver) review(csr *certv1.CertificateSigningRequest) (string, *refusal, time.Duration) {
	if want := a.cfg.username(); csr.Spec.Username != want {
		return "", refuse(ReasonNotManager, "requested by %q, not by the managers' service account %q", csr.Spec.Username, want), 0
	}
	podName, podUID, node := extra(csr, managerapi.ExtraPodName), extra(csr, managerapi.ExtraPodUID), extra(csr, managerapi.ExtraNodeName)
	if podName == "" || podUID == "" || node == "" {
		return "", refuse(ReasonUnknownPod, "spec.extra names no pod (%s, %s, %s): the CSR must be made with the manager pod's own service account token, "+
			"since every manager shares the service account", managerapi.ExtraPodName, managerapi.ExtraPodUID, managerapi.ExtraNodeName), 0
	}
	pod, err := a.pods.Get(podName)
	if apierrors.IsNotFound(err) {
		if wait := csr.CreationTimestamp.Add(PodCacheGrace).Sub(a.clock.Now()); wait > 0 {
			return "", nil, wait
		}
	}
	if no := a.checkPod(pod, err, podName, podUID, node); no != nil {
		return "", no, 0
	}
	req, no := parseRequest(csr.Spec.Request)
	if no != nil {
		return "", no, 0
	}
	if no := checkRequest(req, csr.Spec.Usages, node); no != nil {
		return "", no, 0
	}
	return fmt.Sprintf("the serving certificate of the manager pod %s/%s (UID %s) on node %q", a.cfg.Namespace, podName, podUID, node), nil, 0
}

// checkPod checks that pod (got with err) is a live manager pod named
// name, with UID uid, on node.
func (a *Approver) checkPod(pod *v1.Pod, err error, name, uid, node string) *refusal {
	where := a.cfg.Namespace + "/" + name
	switch {
	case apierrors.IsNotFound(err):
		return refuse(ReasonUnknownPod, "no pod %s: the requester's pod is gone, or not in the managers' namespace", where)
	case err != nil:
		return refuse(ReasonUnknownPod, "pod %s: %v", where, err)
	case !a.cfg.ManagerSelector.Matches(labels.Set(pod.Labels)) || pod.Spec.ServiceAccountName != a.cfg.ServiceAccount:
		return refuse(ReasonUnknownPod, "pod %s is not a manager pod (selector %q, service account %q)", where, a.cfg.ManagerSelector, a.cfg.ServiceAccount)
	case string(pod.UID) != uid:
		return refuse(ReasonUnknownPod, "pod %s has UID %s, not the token's %s: the requester's pod is gone", where, pod.UID, uid)
	case pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		return refuse(ReasonPodTerminating, "pod %s is terminating or finished", where)
	case pod.Spec.NodeName != node:
		return refuse(ReasonWrongNode, "pod %s runs on node %q, not on the token's node %q", where, pod.Spec.NodeName, node)
	}
	return nil
}

// extra is the one value of spec.extra[key], or "".
func extra(csr *certv1.CertificateSigningRequest, key string) string {
	if v := csr.Spec.Extra[key]; len(v) == 1 {
		return v[0]
	}
	return ""
}
