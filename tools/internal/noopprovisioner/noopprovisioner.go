// Package noopprovisioner is the floor that scripts/bench-provision.sh
// measures the hostpath provisioner against: a provisioner on the same
// library (sig-storage-lib-external-provisioner) that does nothing but write
// PV objects. Provision returns a hostPath PV at once (no directory, no
// manager call, no owner record) and Delete returns at once, so what the
// benchmark times for it is the library, the API server and
// kube-controller-manager alone.
//
// By default it is the fair floor: the library adds its finalizer
// (LibraryFinalizer, controller.AddFinalizer(true)) to every PV and removes
// it after deleting the PV, as Kubernetes 1.33 and later (KEP-2644, GA)
// expect of a provisioner that honours the reclaim policy, and as the
// provisioner does with a finalizer of its own. Options.Finalizer false
// (--finalizer=false) is the old floor, with no finalizer, for comparison.
//
// The comparison is only fair if the floor is never tuned to look slow:
// Options.Run configures the library's ProvisionController exactly as the
// provisioner does (provisioner/internal/app, Config.wire): leader election
// off, shared informers for claims, volumes and classes with the same
// resync period, its own metrics instance, PVs saved in the background
// with client-go's default controller rate limiter
// (CreateProvisionedPVLimiter), and the library's defaults for everything
// else (failed-provision and failed-delete thresholds, exponential backoff
// on errors). Its client limits and worker count are flags, which the
// benchmark sets to the sum over the provisioner instances it stands in
// for. What it lacks is all the provisioner does beyond the library (claim
// sync, reclaim controller, orphan sweeper, peer and manager informers):
// that is the cost being measured.
package noopprovisioner

import (
	"context"
	"errors"
	"path"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

const (
	// DefaultProvisionerName is the name the benchmark's StorageClass
	// hostpath-bench-noop names.
	DefaultProvisionerName = "hostpath.dev/noop-bench"
	// PathPrefix is where the PVs' paths point; nothing is ever created
	// there, so a pod using such a PV does not start.
	PathPrefix = "/var/hostpath-noop-bench"
	// LibraryFinalizer is the finalizer the library puts on the PVs it
	// creates when run with controller.AddFinalizer(true) (its finalizerPV,
	// unexported); the fair floor's PVs carry it.
	LibraryFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
)

// Provisioner is the library Provisioner that only returns PV objects.
type Provisioner struct {
	// nodes, when not nil, gives the hostname label of a claim's node.
	nodes corelisters.NodeLister
}

var (
	_ controller.Provisioner      = &Provisioner{}
	_ controller.BlockProvisioner = &Provisioner{}
)

// New returns the Provisioner; nodes (may be nil) is where the hostname
// label of a claim's node is looked up for the PV's node affinity.
func New(nodes corelisters.NodeLister) *Provisioner {
	return &Provisioner{nodes: nodes}
}

// SupportsBlock reports that only filesystem volumes are provisioned, as
// the provisioner does.
func (p *Provisioner) SupportsBlock(context.Context) bool { return false }

// Provision returns the PV of a claim at once: a hostPath PV whose path is
// PathPrefix/<PV name>, with the claim's request as capacity and its access
// modes, the class's reclaim policy and mount options and, when the claim is
// pinned to a node (hostpathv1.AnnotationProvisionOnNode), a required node affinity to that node.
// The library adds the claim reference, the class name and the
// provisioned-by annotation.
func (p *Provisioner) Provision(_ context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := opts.PVC
	if claim == nil {
		return nil, controller.ProvisioningFinished, errors.New("no claim to provision")
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: claim.Spec.Resources.Requests[v1.ResourceStorage]},
			AccessModes:                   slices.Clone(claim.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: reclaimPolicy(opts.StorageClass),
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: path.Join(PathPrefix, opts.PVName), Type: ptr.To(v1.HostPathDirectory)},
			},
		},
	}
	if opts.StorageClass != nil {
		pv.Spec.MountOptions = slices.Clone(opts.StorageClass.MountOptions)
	}
	if node := claim.Annotations[hostpathv1.AnnotationProvisionOnNode]; node != "" {
		pv.Annotations = map[string]string{hostpathv1.AnnotationNode: node}
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{
					Key:      v1.LabelHostname,
					Operator: v1.NodeSelectorOpIn,
					Values:   []string{p.hostname(node)},
				}},
			}},
		}}
	}
	return pv, controller.ProvisioningFinished, nil
}

// Delete does nothing: there is nothing to remove. The library then deletes
// the PV object.
func (p *Provisioner) Delete(context.Context, *v1.PersistentVolume) error { return nil }

// hostname is the kubernetes.io/hostname label of node, from the node
// lister, or the node's name when the lister has no such node or label.
func (p *Provisioner) hostname(node string) string {
	if p.nodes == nil {
		return node
	}
	if n, err := p.nodes.Get(node); err == nil && n.Labels[v1.LabelHostname] != "" {
		return n.Labels[v1.LabelHostname]
	}
	return node
}

// reclaimPolicy is the class's reclaim policy, Delete when it has none.
func reclaimPolicy(class *storagev1.StorageClass) v1.PersistentVolumeReclaimPolicy {
	if class != nil && class.ReclaimPolicy != nil {
		return *class.ReclaimPolicy
	}
	return v1.PersistentVolumeReclaimDelete
}
