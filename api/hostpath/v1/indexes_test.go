package v1

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestIndexFunctions(t *testing.T) {
	def := &HostDefinition{Spec: HostDefinitionSpec{NodeName: "node-1", Pool: "fast"}}
	for _, tc := range []struct {
		name               string
		obj                any
		wantNode, wantPool []string
	}{
		{name: "definition", obj: def, wantNode: []string{"node-1"}, wantPool: []string{"fast"}},
		{name: "scheduled pod", obj: &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-1"}}, wantNode: []string{"node-1"}},
		{name: "pending pod", obj: &corev1.Pod{}},
		{name: "definition without spec", obj: &HostDefinition{}},
		{name: "other type", obj: &corev1.Node{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := IndexByNodeName(tc.obj); err != nil || !slices.Equal(got, tc.wantNode) {
				t.Errorf("IndexByNodeName = %q, %v; want %q", got, err, tc.wantNode)
			}
			if got, err := IndexByPool(tc.obj); err != nil || !slices.Equal(got, tc.wantPool) {
				t.Errorf("IndexByPool = %q, %v; want %q", got, err, tc.wantPool)
			}
		})
	}
}
