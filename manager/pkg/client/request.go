package client

import (
	corev1 "k8s.io/api/core/v1"
)

// AnnotationClaimNamespace is the PersistentVolume annotation, set by the
// provisioner, that names the namespace of the claim the volume was made
// for; the owner record of the volume's directory keeps it.
const AnnotationClaimNamespace = "hostpath.dev/claim-namespace"

// ClaimNamespaceOf is the namespace a manager records for the directory of
// pv: its AnnotationClaimNamespace, "" when it has none.
func ClaimNamespaceOf(pv *corev1.PersistentVolume) string {
	return pv.Annotations[AnnotationClaimNamespace]
}

// NewCreateVolumeRequest is the request that creates (or confirms) the
// directory of pv: owner pv.Name, reclaim policy RecordedReclaimPolicy(pv),
// claim namespace ClaimNamespaceOf(pv), RequiredBytes pv's storage
// capacity (0 when none), Multihost when pv's AnnotationMode is
// ModeMultihost, with the class's dirMode (octal, "" for DefaultMode) and
// enforceSize. Every caller that makes a PV's directory builds its request
// here, so that the owner records of all directories start alike.
func NewCreateVolumeRequest(pv *corev1.PersistentVolume, dirMode string, enforceSize bool) CreateVolumeRequest {
	req := CreateVolumeRequest{
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
// owner record of pv's directory: ReclaimDelete for Delete, "" when pv
// names none, and ReclaimRetain for anything else (Retain, Recycle), so
// that a directory is removed by policy only when its volume asked for it.
func RecordedReclaimPolicy(pv *corev1.PersistentVolume) string {
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimDelete:
		return ReclaimDelete
	case "":
		return ""
	}
	return ReclaimRetain
}

// IsMultihost reports whether pv is a multihost volume: its AnnotationMode
// is ModeMultihost.
func IsMultihost(pv *corev1.PersistentVolume) bool {
	return pv.Annotations[AnnotationMode] == ModeMultihost
}
