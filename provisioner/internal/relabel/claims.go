package relabel

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/responsibility"
)

// ClaimConfig is what Claims needs: Config and the StorageClasses.
type ClaimConfig struct {
	Config
	// Classes are the StorageClasses (a synced cache).
	Classes storagelisters.StorageClassLister
}

// Claims labels the claims of hostpath made before the claim-labelling
// policy was bound, with the value the policy gives them
// (hostpathv1.ClaimNodeLabel): the policy labels a claim when it is
// created or updated, and an instance that watches claims by label sees
// none without it. Each instance runs it at start, where the policy is
// bound, before its claim cache first lists; it lists the claims without
// the label (from the API server's watch cache, page by page) and labels
// the hostpath claims of its node, and those of no single node, or of a
// node that runs no instance, that it is elected for. It returns how many
// it labelled and the errors joined.
func Claims(ctx context.Context, cfg ClaimConfig) (int, error) {
	n, err := eachUnlabelled(ctx, "claims", func(opts metav1.ListOptions) (runtime.Object, error) {
		return cfg.Client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
	}, func(claim *v1.PersistentVolumeClaim) (bool, error) {
		value, mine, err := cfg.claimLabel(claim)
		if err != nil || !mine {
			return false, err
		}
		return true, patchClaimLabel(ctx, cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace), claim, value, cfg.FieldManager)
	})
	if n > 0 {
		klog.FromContext(ctx).Info("Labelled the claims made before the claim-labelling policy", "label", hostpathv1.LabelNode, "labelled", n)
	}
	return n, err
}

// claimLabel returns the label of claim and whether this instance gives
// it: not for another provisioner's claim, nor one of another node that
// runs an instance.
func (cfg ClaimConfig) claimLabel(claim *v1.PersistentVolumeClaim) (string, bool, error) {
	class, err := cfg.Classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil && !apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("get the StorageClass of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	ours := responsibility.ClaimNamesHostpath(claim, cfg.Names) || (class != nil && responsibility.HostpathName(class.Provisioner, cfg.Names))
	if !ours || responsibility.ForeignClaim(claim, cfg.Names) {
		return "", false, nil
	}
	multihost := class != nil && class.Parameters[hostpathv1.ParamMode] == hostpathv1.ModeMultihost
	node := hostpathv1.ClaimNode(claim)
	served := true
	if !multihost && node != "" && node != cfg.Node {
		if served, err = cfg.Instances.OnNode(node); err != nil {
			return "", false, fmt.Errorf("tell whether an instance runs on node %q: %w", node, err)
		}
	}
	value := hostpathv1.ClaimNodeLabel(claim, multihost, func(string) bool { return served })
	if !multihost && node != "" && served {
		// Its node's instance labels it (this one, or that node's at its
		// start).
		return value, node == cfg.Node, nil
	}
	elected, err := cfg.Instances.Elected(string(claim.UID))
	if err != nil {
		return "", false, fmt.Errorf("elect the instance that labels claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return value, elected, nil
}

// claimPatcher is the part of the claims' client patchClaimLabel uses.
type claimPatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.PersistentVolumeClaim, error)
}

// patchClaimLabel sets the watch label of claim to value with a merge
// patch that carries its UID; a claim gone or made again is left.
func patchClaimLabel(ctx context.Context, claims claimPatcher, claim *v1.PersistentVolumeClaim, value, fieldManager string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":    claim.UID,
		"labels": map[string]string{hostpathv1.LabelNode: value},
	}})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = claims.Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("label claim %s/%s with %s: %w", claim.Namespace, claim.Name, hostpathv1.LabelNode, err)
	}
	return nil
}
