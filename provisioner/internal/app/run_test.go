package app

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/app/cachetrim"
)

// TestPodNode: the node of an instance's pod, as cached (the stub), is
// the one it is scheduled to, else the one its DaemonSet's affinity
// names; a tombstone's too.
func TestPodNode(t *testing.T) {
	daemon := func(node string) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "hostpath.dev/provisioner", Operator: v1.NodeSelectorOpNotIn, Values: []string{"false"}}},
				MatchFields:      []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
			}}}}}
	}
	trim := cachetrim.New(hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName))
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"scheduled", &v1.Pod{Spec: v1.PodSpec{NodeName: "n1", Affinity: daemon("n1")}}, "n1"},
		{"not scheduled yet", &v1.Pod{Spec: v1.PodSpec{Affinity: daemon("n2")}}, "n2"},
		{"no node at all", &v1.Pod{}, ""},
		{"an affinity by label only", &v1.Pod{Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub, err := trim(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got := podNode(stub); got != tc.want {
				t.Errorf("podNode(stub) = %q, want %q", got, tc.want)
			}
			if got := podNode(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: stub}); got != tc.want {
				t.Errorf("podNode(tombstone) = %q, want %q", got, tc.want)
			}
		})
	}
}
