package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"hostpath.dev/manager/pkg/client"
)

// supportedAccessModes are the access modes one node's directory can serve.
var supportedAccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadWriteOncePod, v1.ReadOnlyMany}

// Provision creates the claim's directory through this node's manager and
// returns its PV.
func (p *Provisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := opts.PVC
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pvc", klog.KObj(claim), "pv", opts.PVName)
	ctx = klog.NewContext(ctx, logger)

	params, err := ParseParameters(opts.StorageClass.Parameters)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if params.Mode == ModeMultihost {
		return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass parameter %q: mode %q is not supported yet; use mode %q", ParamMode, ModeMultihost, ModeNode)
	}
	if err := checkClaim(claim); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	choice := chooseNode(claim)
	if choice.node != p.cfg.Node {
		// The claim changed since ShouldProvision: its owner handles it.
		return nil, controller.ProvisioningFinished, &controller.IgnoredError{Reason: fmt.Sprintf("the claim now belongs to node %q", choice.node)}
	}
	node, err := p.cfg.Nodes.Get(p.cfg.Node)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, controller.ProvisioningInBackground, fmt.Errorf("node %q is not in the cache yet; will retry", p.cfg.Node)
		}
		return nil, controller.ProvisioningInBackground, fmt.Errorf("read node %q: %w", p.cfg.Node, err)
	}
	hostname := node.Labels[v1.LabelHostname]
	if hostname == "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("node %q has no %s label to give the volume node affinity", node.Name, v1.LabelHostname)
	}
	dir, err := params.Directory(claim.Namespace, claim.Name, opts.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	size := claim.Spec.Resources.Requests[v1.ResourceStorage]

	mgr, err := p.cfg.Managers(p.cfg.Node)
	if err != nil {
		state, err := provisioningState(err, !choice.pinned())
		return nil, state, err
	}
	vol, err := mgr.CreateVolume(ctx, params.Pool, dir, client.CreateVolumeRequest{Mode: params.DirMode, RequiredBytes: size.Value()})
	if err != nil {
		state, err := provisioningState(fmt.Errorf("create directory %q in pool %q on node %q: %w", dir, params.Pool, p.cfg.Node, err), !choice.pinned())
		return nil, state, err
	}
	logger.V(2).Info("Created the volume directory", "node", p.cfg.Node, "pool", params.Pool, "path", vol.Path)
	return buildPV(pvInput{
		name:     opts.PVName,
		class:    opts.StorageClass,
		claim:    claim,
		node:     p.cfg.Node,
		hostname: hostname,
		pool:     params.Pool,
		dir:      dir,
		path:     vol.Path,
		size:     size,
	}), controller.ProvisioningFinished, nil
}

// checkClaim rejects claims one node's directory cannot serve.
func checkClaim(claim *v1.PersistentVolumeClaim) error {
	for _, m := range claim.Spec.AccessModes {
		if m == v1.ReadWriteMany {
			return fmt.Errorf("access mode %s is not supported in mode %q: one node's directory cannot be shared across nodes (that is what mode %q is for, not available yet); use ReadWriteOnce, ReadWriteOncePod or ReadOnlyMany", m, ModeNode, ModeMultihost)
		}
		if !slices.Contains(supportedAccessModes, m) {
			return fmt.Errorf("access mode %s is not supported; use ReadWriteOnce, ReadWriteOncePod or ReadOnlyMany", m)
		}
	}
	if claim.Spec.Selector != nil {
		return errors.New("claims with a selector are not supported: remove spec.selector")
	}
	if claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil {
		return errors.New("claims with a data source are not supported: remove spec.dataSource")
	}
	if _, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]; !ok {
		return errors.New("the claim requests no storage size")
	}
	return nil
}

// pvInput is what a node-mode PV is made of.
type pvInput struct {
	name     string
	class    *storagev1.StorageClass
	claim    *v1.PersistentVolumeClaim
	node     string
	hostname string
	pool     string
	dir      string
	path     string
	size     resource.Quantity
}

// buildPV returns the PV of a node-mode volume. The library adds the claim
// reference, the storage class name and pv.kubernetes.io/provisioned-by.
func buildPV(in pvInput) *v1.PersistentVolume {
	reclaim := v1.PersistentVolumeReclaimDelete
	if in.class.ReclaimPolicy != nil {
		reclaim = *in.class.ReclaimPolicy
	}
	hostPathType := v1.HostPathDirectory
	fs := v1.PersistentVolumeFilesystem
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: in.name,
			Annotations: map[string]string{
				AnnNode:           in.node,
				AnnPool:           in.pool,
				AnnDirectory:      in.dir,
				AnnClaimNamespace: in.claim.Namespace,
				AnnClaimName:      in.claim.Name,
				AnnMode:           string(ModeNode),
			},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: in.size},
			AccessModes:                   slices.Clone(in.claim.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  slices.Clone(in.class.MountOptions),
			VolumeMode:                    &fs,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: in.path, Type: &hostPathType},
			},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{
						Key:      v1.LabelHostname,
						Operator: v1.NodeSelectorOpIn,
						Values:   []string{in.hostname},
					}},
				}},
			}},
		},
	}
}

// Delete removes a PV's directory through the manager of its node.
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	node := pv.Annotations[AnnNode]
	if node != p.cfg.Node {
		return &controller.IgnoredError{Reason: fmt.Sprintf("the volume is on node %q", node)}
	}
	pool, dir := pv.Annotations[AnnPool], pv.Annotations[AnnDirectory]
	if pool == "" || dir == "" {
		return fmt.Errorf("volume %s lacks the annotations %s and %s: remove its directory by hand and delete the volume", pv.Name, AnnPool, AnnDirectory)
	}
	mgr, err := p.cfg.Managers(node)
	if err != nil {
		return err
	}
	if err := mgr.DeleteVolume(ctx, pool, dir); err != nil {
		return deletionError(fmt.Errorf("delete directory %q in pool %q on node %q: %w", dir, pool, node, err))
	}
	klog.FromContext(ctx).V(2).Info("Deleted the volume directory", "pv", pv.Name, "node", node, "pool", pool, "directory", dir)
	return nil
}
