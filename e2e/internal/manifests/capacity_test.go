package manifests

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// existingClasses are the example classes of releases before
// capacity-aware scheduling: a StorageClass's provisioner cannot change,
// so an upgrade must keep theirs.
var existingClasses = []string{"hostpath", "hostpath-retain", "hostpath-immediate", "hostpath-shared"}

// TestBaseCapacityAware checks what capacity-aware scheduling needs in the
// base: the CSIDriver named like the classes' provisioner hostpath.dev,
// with storageCapacity and nothing a kubelet would act on; a
// WaitForFirstConsumer example class of that provisioner; the older classes
// unchanged in their provisioner; and the provisioner's Role on
// csistoragecapacities in its namespace.
func TestBaseCapacityAware(t *testing.T) {
	for _, component := range []string{"", "components/btrfs"} {
		t.Run("base+"+component, func(t *testing.T) {
			m := render(t, component)
			driver := &storagev1.CSIDriver{}
			m.decode(t, key{"CSIDriver", "", hostpathv1.CapacityProvisionerName}, driver)
			s := driver.Spec
			switch {
			case s.StorageCapacity == nil || !*s.StorageCapacity:
				t.Errorf("CSIDriver %s: storageCapacity %v, want true", driver.Name, s.StorageCapacity)
			case s.AttachRequired == nil || *s.AttachRequired:
				t.Errorf("CSIDriver %s: attachRequired %v, want false", driver.Name, s.AttachRequired)
			case s.PodInfoOnMount == nil || *s.PodInfoOnMount:
				t.Errorf("CSIDriver %s: podInfoOnMount %v, want false", driver.Name, s.PodInfoOnMount)
			case !slices.Equal(s.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}):
				t.Errorf("CSIDriver %s: volumeLifecycleModes %v, want [Persistent]", driver.Name, s.VolumeLifecycleModes)
			case s.FSGroupPolicy == nil || *s.FSGroupPolicy != storagev1.NoneFSGroupPolicy:
				t.Errorf("CSIDriver %s: fsGroupPolicy %v, want None", driver.Name, s.FSGroupPolicy)
			}

			var capacityAware []string
			for k := range m.docs {
				if k.kind != "StorageClass" {
					continue
				}
				sc := m.storageClass(t, k.name)
				switch {
				case slices.Contains(existingClasses, sc.Name) && sc.Provisioner != hostpathv1.DefaultProvisionerName:
					t.Errorf("class %s: provisioner %q, want %q as in earlier releases (it cannot change)", sc.Name, sc.Provisioner, hostpathv1.DefaultProvisionerName)
				case sc.Provisioner == hostpathv1.CapacityProvisionerName:
					if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
						t.Errorf("capacity-aware class %s: binding mode %v, want WaitForFirstConsumer (the scheduler checks no other)", sc.Name, sc.VolumeBindingMode)
					}
					capacityAware = append(capacityAware, sc.Name)
				case sc.Provisioner != hostpathv1.DefaultProvisionerName:
					t.Errorf("class %s: provisioner %q, not one the provisioner serves", sc.Name, sc.Provisioner)
				}
			}
			slices.Sort(capacityAware)
			want := []string{"hostpath-capacity"}
			if component != "" {
				want = []string{"hostpath-btrfs-capacity", "hostpath-capacity"}
			}
			if !slices.Equal(capacityAware, want) {
				t.Errorf("capacity-aware classes %q, want %q", capacityAware, want)
			}

			role := &rbacv1.Role{}
			m.decode(t, key{"Role", namespace, provisionerName}, role)
			verbs := []string{"get", "list", "watch", "create", "update", "delete"}
			if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Equal(r.APIGroups, []string{"storage.k8s.io"}) && slices.Equal(r.Resources, []string{"csistoragecapacities"}) &&
					len(r.ResourceNames) == 0 && slices.Equal(r.Verbs, verbs)
			}) {
				t.Errorf("Role %s/%s has no rule for csistoragecapacities %v: %+v", namespace, provisionerName, verbs, role.Rules)
			}
		})
	}
}
