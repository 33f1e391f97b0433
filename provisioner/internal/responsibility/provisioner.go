package responsibility

import (
	v1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// Whose an object is at all: hostpath's, or another provisioner's. No
// instance acts for another provisioner's claim or PV (nor caches it:
// package cachetrim), whatever the rule would say.

// claimAnnotations are the annotations that name the provisioner that is
// to make a claim's volume. kube-controller-manager's PersistentVolume
// controller sets AnnStorageProvisioner, and AnnBetaStorageProvisioner to
// the same value, from the claim's StorageClass; the library provisions
// only a claim whose AnnStorageProvisioner (else
// AnnBetaStorageProvisioner) is one of its names.
var claimAnnotations = []string{storagehelpers.AnnStorageProvisioner, storagehelpers.AnnBetaStorageProvisioner}

// ForeignClaim reports whether claim is, by its storage-provisioner
// annotations, another provisioner's than hostpath's: both, where set,
// name another provisioner, and one at least is set.
func ForeignClaim(claim *v1.PersistentVolumeClaim, names hostpathv1.ProvisionerNames) bool {
	set := false
	for _, key := range claimAnnotations {
		p, ok := claim.Annotations[key]
		if !ok {
			continue
		}
		if !otherProvisioner(p, names) {
			return false
		}
		set = true
	}
	return set
}

// ClaimNamesHostpath reports whether one of claim's storage-provisioner
// annotations names hostpath (HostpathName).
func ClaimNamesHostpath(claim *v1.PersistentVolumeClaim, names hostpathv1.ProvisionerNames) bool {
	for _, key := range claimAnnotations {
		if p, ok := claim.Annotations[key]; ok && HostpathName(p, names) {
			return true
		}
	}
	return false
}

// ForeignVolume reports whether pv is another provisioner's than hostpath's,
// or made by hand: neither its provisioned-by nor its migrated-to
// annotation nor its CSI driver names hostpath.
func ForeignVolume(pv *v1.PersistentVolume, names hostpathv1.ProvisionerNames) bool {
	if HostpathName(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned], names) || HostpathName(pv.Annotations[storagehelpers.AnnMigratedTo], names) {
		return false
	}
	return pv.Spec.CSI == nil || !HostpathName(pv.Spec.CSI.Driver, names)
}

// otherProvisioner reports whether name is a provisioner name that is not
// hostpath's.
func otherProvisioner(name string, names hostpathv1.ProvisionerNames) bool {
	return name != "" && !HostpathName(name, names)
}

// HostpathName reports whether name is one of names or of hostpath's
// default names, whatever the instance is configured with.
func HostpathName(name string, names hostpathv1.ProvisionerNames) bool {
	return names.Has(name) || name == hostpathv1.DefaultProvisionerName || name == hostpathv1.CapacityProvisionerName
}
