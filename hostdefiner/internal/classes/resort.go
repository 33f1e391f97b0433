package classes

import (
	"context"
	"fmt"
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
	if !c.resort {
		return nil
	}
	sel := labels.SelectorFromSet(labels.Set{hostpathv1.LabelNode: hostpathv1.NodeLabelUnsorted})
	claims, err := c.kube.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("list the claims labelled %s: %w", sel, err)
	}
	var sorted []v1.PersistentVolumeClaim
	for i := range claims.Items {
		if Sorts(want, &claims.Items[i]) {
			sorted = append(sorted, claims.Items[i])
		}
	}
	touched, err := c.touchAll(ctx, sorted, func(got *v1.PersistentVolumeClaim) bool {
		return got.Labels[hostpathv1.LabelNode] != hostpathv1.NodeLabelUnsorted
	})
	if err != nil {
		if c.resortTries++; c.resortTries < touchTries {
			return err
		}
		klog.FromContext(ctx).Error(err, "Gave up sorting the Unsorted claims: each is labelled again at its next update", "tries", c.resortTries)
	}
	c.resort, c.resortTries = false, 0
	if touched > 0 {
		klog.FromContext(ctx).V(2).Info("Touched the Unsorted claims that the ConfigMap of the classes now sorts", "claims", touched)
	}
	return nil
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
