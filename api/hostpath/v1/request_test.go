package v1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/managerapi"
)

// testPV is PersistentVolume pv-a with reclaim policy policy and, unless
// capacity is "", that storage capacity.
func testPV(policy corev1.PersistentVolumeReclaimPolicy, capacity string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-a"},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy},
	}
	if capacity != "" {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
	return pv
}

func TestRecordedReclaimPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy corev1.PersistentVolumeReclaimPolicy
		want   string
	}{
		{corev1.PersistentVolumeReclaimDelete, managerapi.ReclaimDelete},
		{corev1.PersistentVolumeReclaimRetain, managerapi.ReclaimRetain},
		{corev1.PersistentVolumeReclaimRecycle, managerapi.ReclaimRetain},
		{"", ""},
		{"Something", managerapi.ReclaimRetain},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			if got := RecordedReclaimPolicy(testPV(tc.policy, "")); got != tc.want {
				t.Errorf("RecordedReclaimPolicy(%q) = %q, want %q", tc.policy, got, tc.want)
			}
			if err := managerapi.ValidateReclaimPolicy(tc.want); err != nil {
				t.Errorf("the recorded policy is one a manager refuses: %v", err)
			}
		})
	}
}

func TestNewCreateVolumeRequest(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		pv          *corev1.PersistentVolume
		dirMode     string
		enforceSize bool
		want        managerapi.CreateVolumeRequest
	}{
		{"Delete with capacity", testPV(corev1.PersistentVolumeReclaimDelete, "1Gi"), "02775", true,
			managerapi.CreateVolumeRequest{Owner: "pv-a", Mode: "02775", ReclaimPolicy: "Delete", RequiredBytes: 1 << 30, EnforceSize: true}},
		{"Delete without capacity", testPV(corev1.PersistentVolumeReclaimDelete, ""), "", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: "Delete"}},
		{"Retain with capacity", testPV(corev1.PersistentVolumeReclaimRetain, "16Mi"), "0777", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", Mode: "0777", ReclaimPolicy: "Retain", RequiredBytes: 16 << 20}},
		{"Retain without capacity", testPV(corev1.PersistentVolumeReclaimRetain, ""), "0777", true,
			managerapi.CreateVolumeRequest{Owner: "pv-a", Mode: "0777", ReclaimPolicy: "Retain", EnforceSize: true}},
		{"Recycle is recorded as Retain", testPV(corev1.PersistentVolumeReclaimRecycle, "1k"), "", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: "Retain", RequiredBytes: 1000}},
		{"no policy", testPV("", "1Mi"), "0700", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", Mode: "0700", RequiredBytes: 1 << 20}},
		{"no policy, no capacity", testPV("", ""), "", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a"}},
		{"fractional capacity rounds up", testPV(corev1.PersistentVolumeReclaimDelete, "1500m"), "", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: "Delete", RequiredBytes: 2}},
		{"claim namespace from the annotation", func() *corev1.PersistentVolume {
			pv := testPV(corev1.PersistentVolumeReclaimRetain, "")
			pv.Annotations = map[string]string{AnnotationClaimNamespace: "team-a", AnnotationClaimName: "data"}
			return pv
		}(), "", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: "Retain", ClaimNamespace: "team-a"}},
		{"multihost", func() *corev1.PersistentVolume {
			pv := testPV(corev1.PersistentVolumeReclaimDelete, "1Mi")
			pv.Annotations = map[string]string{AnnotationMode: ModeMultihost}
			return pv
		}(), "0777", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", Mode: "0777", ReclaimPolicy: "Delete", RequiredBytes: 1 << 20, Multihost: true}},
		{"node mode said outright", func() *corev1.PersistentVolume {
			pv := testPV(corev1.PersistentVolumeReclaimDelete, "")
			pv.Annotations = map[string]string{AnnotationMode: ModeNode}
			return pv
		}(), "", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: "Delete"}},
		{"capacity of another resource only", func() *corev1.PersistentVolume {
			pv := testPV(corev1.PersistentVolumeReclaimDelete, "")
			pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			return pv
		}(), "", false,
			managerapi.CreateVolumeRequest{Owner: "pv-a", ReclaimPolicy: "Delete"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := NewCreateVolumeRequest(tc.pv, tc.dirMode, tc.enforceSize); got != tc.want {
				t.Errorf("NewCreateVolumeRequest = %+v, want %+v", got, tc.want)
			}
		})
	}
}
