package classes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// sortUnsorted touches the claims labelled Unsorted that the ConfigMap
// want now sorts (hostpathv1.ClaimNodeLabel gives them a node or
// Multihost), after a sync added keys to it (c.resort): a claim labelled
// while its class was not listed yet, or while its node ran no
// provisioner pod, is Unsorted until its next update, and a bound claim
// may never have one (an upgrade: the provisioners label the claims of an
// older release at start, maybe before the host definer listed their
// classes). The touch (touchAll) is an update on which the API server
// runs the policy, which sets the label again from the parameters it has
// (an API server that has not seen the new ConfigMap yet leaves the claim
// Unsorted, and the next sync that adds a key tries again).
// Every instance watches the Unsorted claims, so a claim left there costs
// events, never a claim that no instance sees.
func (c *Controller) sortUnsorted(ctx context.Context, want map[string]string) error {
	sel := labels.SelectorFromSet(labels.Set{hostpathv1.LabelNode: hostpathv1.NodeLabelUnsorted})
	touched, err := c.sweep(ctx, &c.resort, sel,
		func(claim *v1.PersistentVolumeClaim) bool { return Sorts(want, claim) },
		func(got *v1.PersistentVolumeClaim) bool {
			return got.Labels[hostpathv1.LabelNode] != hostpathv1.NodeLabelUnsorted
		},
		"sorting the Unsorted claims")
	if touched > 0 {
		klog.FromContext(ctx).V(2).Info("Touched the Unsorted claims that the ConfigMap of the classes now sorts", "claims", touched)
	}
	return err
}

// sortUnlabelled touches the claims of hostpath (OfHostpath) that carry
// no watch label, after a sync created the ConfigMap (c.unlabelled): the
// API server skips the claim-labelling policy while its parameters are
// missing (parameterNotFoundAction Allow), so a claim created then has no
// label, no instance that watches by label sees it, and a pending claim
// may get no other update that would label it (a WaitForFirstConsumer
// claim pinned to a node, with no pod yet). The touch sets Unsorted, and
// the policy labels the claim from the parameters it has; an API server
// that has not seen the new ConfigMap yet leaves it Unsorted, which every
// instance watches, and sortUnsorted sorts it with the next key added.
// The list is of every unlabelled claim of the cluster, other
// provisioners' too: once per creation of the ConfigMap.
func (c *Controller) sortUnlabelled(ctx context.Context, want map[string]string) error {
	touched, err := c.sweep(ctx, &c.unlabelled, hostpathv1.UnlabelledSelector(),
		func(claim *v1.PersistentVolumeClaim) bool { return OfHostpath(want, claim) },
		func(got *v1.PersistentVolumeClaim) bool { return got.Labels[hostpathv1.LabelNode] != "" },
		"labelling the claims made while the ConfigMap of the classes was missing")
	if touched > 0 {
		klog.FromContext(ctx).Info("Labelled the claims made while the ConfigMap of the classes was missing", "claims", touched)
	}
	return err
}

// owed is a sweep (Controller.sweep) a sync owes: due until one succeeds
// or touchTries syncs failed it.
type owed struct {
	due   bool
	tries int
}

// sweep does o when it is due: it lists the claims of sel, touches those
// pick keeps (touchAll, done saying which came back labelled as wanted),
// and returns how many it touched. A failure is returned, so that the
// queue retries the sync, until touchTries syncs failed; then it is
// logged as giving up what (each claim is labelled at the next update
// that runs the policy) and o is no longer due.
func (c *Controller) sweep(ctx context.Context, o *owed, sel labels.Selector, pick, done func(*v1.PersistentVolumeClaim) bool, what string) (int, error) {
	if !o.due {
		return 0, nil
	}
	claims, err := c.kube.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0, fmt.Errorf("list the claims of %s: %w", sel, err)
	}
	var picked []v1.PersistentVolumeClaim
	for i := range claims.Items {
		if pick(&claims.Items[i]) {
			picked = append(picked, claims.Items[i])
		}
	}
	touched, err := c.touchAll(ctx, picked, done)
	if err != nil {
		if o.tries++; o.tries < touchTries {
			return touched, err
		}
		klog.FromContext(ctx).Error(err, "Gave up "+what+": each is labelled at the next update that runs the policy", "tries", o.tries)
	}
	*o = owed{}
	return touched, nil
}

// OfHostpath reports whether the policy, with the parameters data, takes
// claim for a claim of hostpath: its class is listed, or its
// storage-provisioner annotation names one of the provisioners.
func OfHostpath(data map[string]string, claim *v1.PersistentVolumeClaim) bool {
	if _, listed := data[hostpathv1.ClassKey(storagehelpers.GetPersistentVolumeClaimClass(claim))]; listed {
		return true
	}
	names := strings.Fields(data[hostpathv1.ProvisionersKey])
	for _, k := range []string{storagehelpers.AnnStorageProvisioner, storagehelpers.AnnBetaStorageProvisioner} {
		if p := claim.Annotations[k]; p != "" && slices.Contains(names, p) {
			return true
		}
	}
	return false
}

// Sorts reports whether the policy, with the parameters data, labels
// claim with something else than Unsorted: its class is listed, and
// hostpathv1.ClaimNodeLabel gives it Multihost or a node.
func Sorts(data map[string]string, claim *v1.PersistentVolumeClaim) bool {
	mode, listed := data[hostpathv1.ClassKey(storagehelpers.GetPersistentVolumeClaimClass(claim))]
	if !listed {
		return false
	}
	served := func(node string) bool {
		_, ok := data[hostpathv1.ServedKey(node)]
		return ok
	}
	return hostpathv1.ClaimNodeLabel(claim, strings.TrimSpace(mode) == hostpathv1.ModeMultihost, served) != hostpathv1.NodeLabelUnsorted
}
