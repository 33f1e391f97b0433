package app

import (
	"context"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// ClaimPolicy says whether the claims of hostpath carry the watch label:
// whether the API server serves MutatingAdmissionPolicyBindings
// (admissionregistration.k8s.io/v1, Kubernetes 1.36 and later) and has the
// binding hostpathv1.ClaimLabelsPolicy. Only then does an instance watch
// claims by hostpathv1.WatchSelector; otherwise it watches every claim, as
// before the label, and decides what to cache itself (cachetrim.Keep).
type ClaimPolicy struct {
	// Served says that the API server serves the bindings.
	Served bool
	// Active says that the binding exists.
	Active bool
}

// errClaimPolicyChanged is the cause with which an instance stops when the
// binding comes or goes: its claim watch is made at start, and the
// DaemonSet's restart makes it anew.
var errClaimPolicyChanged = errors.New("the claim-labelling policy binding " + hostpathv1.ClaimLabelsPolicy + " came or went: restarting to watch claims accordingly")

// findClaimPolicy asks the API server whether the policy is served and
// bound (one discovery call, one GET). An error other than NotFound is
// returned: an instance that cannot tell does not guess.
func findClaimPolicy(ctx context.Context, kube kubernetes.Interface) (ClaimPolicy, error) {
	resources, err := kube.Discovery().ServerResourcesForGroupVersion(admissionv1.SchemeGroupVersion.String())
	if err != nil {
		return ClaimPolicy{}, fmt.Errorf("discover %s: %w", admissionv1.SchemeGroupVersion, err)
	}
	var p ClaimPolicy
	for _, r := range resources.APIResources {
		p.Served = p.Served || r.Name == "mutatingadmissionpolicybindings"
	}
	if !p.Served {
		return p, nil
	}
	_, err = kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, hostpathv1.ClaimLabelsPolicy, metav1.GetOptions{})
	switch {
	case err == nil:
		p.Active = true
	case !apierrors.IsNotFound(err):
		return p, fmt.Errorf("get MutatingAdmissionPolicyBinding %s: %w", hostpathv1.ClaimLabelsPolicy, err)
	}
	return p, nil
}

// watchClaimPolicy calls changed when the binding comes while p
// says it is not there, or goes while p says it is; it watches only where
// the API server serves bindings, until ctx is done.
func watchClaimPolicy(ctx context.Context, kube kubernetes.Interface, p ClaimPolicy, changed func()) error {
	if !p.Served {
		return nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, hostpathv1.ClaimLabelsPolicy).String()
	}))
	inf := factory.Admissionregistration().V1().MutatingAdmissionPolicyBindings().Informer()
	check := func() {
		if _, exists, err := inf.GetStore().GetByKey(hostpathv1.ClaimLabelsPolicy); err == nil && exists != p.Active {
			klog.FromContext(ctx).Info("The claim-labelling policy binding changed", "binding", hostpathv1.ClaimLabelsPolicy, "bound", exists)
			changed()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { check() }, DeleteFunc: func(any) { check() },
	}); err != nil {
		return fmt.Errorf("watch MutatingAdmissionPolicyBinding %s: %w", hostpathv1.ClaimLabelsPolicy, err)
	}
	factory.Start(ctx.Done())
	// A binding gone before the first list sends no event.
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			check()
		}
	}()
	return nil
}
