// Package resize expands bound claims of the provisioner's volumes: a small
// external resizer, in the shape of kubernetes-csi/external-resizer for a
// volume that needs no node expansion (a directory has no filesystem to
// grow). Kubernetes leaves the expansion of a non-CSI volume to an external
// controller: the API server admits a larger request when the claim's
// StorageClass has allowVolumeExpansion, and kube-controller-manager only
// records "waiting for an external controller to expand this PVC".
//
// How a claim is grown (Controller):
//
//  1. Every instance sees the claim through the shared informer. A claim is
//     to grow when it is Bound to a PV of this provisioner that is bound to
//     it, its storage request is larger than the PV's capacity, and its
//     StorageClass has allowVolumeExpansion (a class missing or not
//     allowing it is left alone: the API server refuses such requests).
//  2. Only the instance that grows the volume acts (responsibility.Grow):
//     the instance of the PV's node (hostpath.dev/node) for a node-mode PV,
//     never another (the directory is on that node's disk, and goes with
//     it); for a multihost PV, the instance that rendezvous hashing of the
//     PV's UID elects. The others write nothing.
//  3. The claim is marked: condition Resizing True,
//     status.allocatedResources[storage] the new size and
//     status.allocatedResourceStatuses[storage] ControllerResizeInProgress;
//     event Resizing.
//  4. The manager of the node (every node of the PV's hostpath.dev/nodes for
//     a multihost PV, in parallel) grows the directory's recorded size, and
//     its quota limit where the pool enforces sizes (PUT
//     /v1/pools/{pool}/volumes/{name}/size, idempotent for one size).
//  5. The PV's spec.capacity becomes the new size.
//  6. The claim is finished: status.capacity the new size, conditions
//     Resizing and ControllerResizeError removed, the storage key of
//     allocatedResourceStatuses removed (allocatedResources keeps the
//     size); event VolumeResizeSuccessful.
//
// Every step is computed from what the caches hold and writes only what
// differs, so a sync that follows a crash between steps ends in the same
// state: a PV already as large as the request skips steps 3 to 5 and
// finishes the claim.
//
// Failures: a manager answering 507 (the growth does not fit in its pool)
// or 409 (volumes never shrink) makes the claim infeasible: condition
// ControllerResizeError with the message, allocatedResourceStatuses[storage]
// ControllerResizeInfeasible, a Warning VolumeResizeFailed, and no retry
// until the user changes the request. Any other failure (no manager, a
// transport error, 5xx) sets ControllerResizeError, keeps Resizing and
// ControllerResizeInProgress, emits VolumeResizeFailed and retries with
// backoff.
package resize

import (
	"context"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"hostpath.dev/api/managerapi"
)

// Reasons of the events this package emits on claims, those of
// external-resizer.
const (
	// ReasonResizing (Normal): the instance started growing the volume.
	ReasonResizing = "Resizing"
	// ReasonResizeSuccessful (Normal): the volume, the PV and the claim
	// have the new size.
	ReasonResizeSuccessful = "VolumeResizeSuccessful"
	// ReasonResizeFailed (Warning): a manager refused the new size
	// (infeasible until the request changes) or could not be reached
	// (retried).
	ReasonResizeFailed = "VolumeResizeFailed"
)

// Manager is what this package needs of a node's manager (*managerapi.Client
// implements it).
type Manager interface {
	// SetSize grows the volume of req.Owner to req.SizeBytes.
	SetSize(ctx context.Context, pool, name string, req managerapi.SetSizeRequest) (*managerapi.Volume, error)
}

// step is what a claim needs next.
type step int

const (
	// stepNone: nothing to do.
	stepNone step = iota
	// stepGrow: the volume must grow to the request (steps 3 to 6).
	stepGrow
	// stepFinish: the PV is as large as the request; the claim's status
	// must say so (step 6).
	stepFinish
)

// nextStep returns what claim, bound to pv, needs, and the size to write:
//
//   - stepGrow to the request when it is larger than the PV's capacity,
//     unless the claim is infeasible at that very size (it waits for the
//     user to change the request);
//   - stepFinish to the PV's capacity when the PV is as large as the
//     request and the claim still carries a mark of a resize (condition
//     Resizing or ControllerResizeError, a storage key in
//     allocatedResourceStatuses) or a status.capacity below the request;
//   - stepNone otherwise.
//
// The StorageClass and who acts are the caller's to check.
func nextStep(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) (step, resource.Quantity) {
	request, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return stepNone, resource.Quantity{}
	}
	pvSize := pv.Spec.Capacity[v1.ResourceStorage]
	if request.Cmp(pvSize) > 0 {
		allocated, ok := claim.Status.AllocatedResources[v1.ResourceStorage]
		if claim.Status.AllocatedResourceStatuses[v1.ResourceStorage] == v1.PersistentVolumeClaimControllerResizeInfeasible &&
			ok && allocated.Cmp(request) == 0 {
			return stepNone, resource.Quantity{}
		}
		return stepGrow, request
	}
	capacity := claim.Status.Capacity[v1.ResourceStorage]
	if resizeMarked(claim) || capacity.Cmp(request) < 0 {
		return stepFinish, pvSize
	}
	return stepNone, resource.Quantity{}
}

// resizeMarked reports whether claim carries a mark of a resize in its
// status.
func resizeMarked(claim *v1.PersistentVolumeClaim) bool {
	if _, ok := claim.Status.AllocatedResourceStatuses[v1.ResourceStorage]; ok {
		return true
	}
	return slices.ContainsFunc(claim.Status.Conditions, func(c v1.PersistentVolumeClaimCondition) bool {
		return c.Type == v1.PersistentVolumeClaimResizing || c.Type == v1.PersistentVolumeClaimControllerResizeError
	})
}

// maxSize is the largest size a manager can be asked for: SetSize takes an
// int64 byte count.
var maxSize = *resource.NewQuantity(math.MaxInt64, resource.BinarySI)

// sizeBytes returns the byte count of size (rounded up), and false when it
// does not fit in an int64.
func sizeBytes(size resource.Quantity) (int64, bool) {
	if size.Cmp(maxSize) > 0 {
		return 0, false
	}
	return size.Value(), true
}
