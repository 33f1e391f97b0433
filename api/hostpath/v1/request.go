package v1

import (
	corev1 "k8s.io/api/core/v1"

	"hostpath.dev/api/managerapi"
)

// What a PersistentVolume of the provisioner asks of the managers: the
// requests that make (or confirm) its directory and the owner record they
// keep, read from the PV's spec and its annotations. Both the provisioner
// and the host definer (backfill) build their requests here.

// ClaimNamespaceOf is the namespace a manager records for the directory of
// pv: its AnnotationClaimNamespace, "" when it has none.
func ClaimNamespaceOf(pv *corev1.PersistentVolume) string {
	return pv.Annotations[AnnotationClaimNamespace]
}

// NewCreateVolumeRequest is the request that creates (or confirms) the
// directory of pv: owner pv.Name, reclaim policy RecordedReclaimPolicy(pv),
// claim namespace ClaimNamespaceOf(pv), RequiredBytes pv's storage
// capacity (0 when none), Multihost when pv IsMultihost, with the class's
// dirMode (octal, "" for managerapi.DefaultMode) and enforceSize. Every caller
// that makes a PV's directory builds its request here, so that the owner
// records of all directories start alike.
func NewCreateVolumeRequest(pv *corev1.PersistentVolume, dirMode string, enforceSize bool) managerapi.CreateVolumeRequest {
	req := managerapi.CreateVolumeRequest{
		Owner:          pv.Name,
		Mode:           dirMode,
		ReclaimPolicy:  RecordedReclaimPolicy(pv),
		ClaimNamespace: ClaimNamespaceOf(pv),
		EnforceSize:    enforceSize,
		Multihost:      IsMultihost(pv),
	}
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		req.RequiredBytes = q.Value()
	}
	return req
}

// RecordedReclaimPolicy is the reclaim policy a manager records in the
// owner record of pv's directory: managerapi.ReclaimDelete for Delete, "" when
// pv names none, and managerapi.ReclaimRetain for anything else (Retain,
// Recycle), so that a directory is removed by policy only when its volume
// asked for it.
func RecordedReclaimPolicy(pv *corev1.PersistentVolume) string {
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimDelete:
		return managerapi.ReclaimDelete
	case "":
		return ""
	}
	return managerapi.ReclaimRetain
}

// IsMultihost reports whether pv is a multihost volume: its AnnotationMode
// is ModeMultihost.
func IsMultihost(pv *corev1.PersistentVolume) bool {
	return pv.Annotations[AnnotationMode] == ModeMultihost
}
