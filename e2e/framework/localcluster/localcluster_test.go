package localcluster

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNodeDir(t *testing.T) {
	const nodesDir = "/repo/.cluster/nodes"
	tests := []struct {
		node, path, want string
		wantErr          bool
	}{
		{node: "hostpath-node-1", path: "/var/hpvolumes/smoke-1/a.txt", want: "/repo/.cluster/nodes/hostpath-node-1/hpvolumes/smoke-1/a.txt"},
		{node: "hostpath-node-2", path: "/var/hpvolumes", want: "/repo/.cluster/nodes/hostpath-node-2/hpvolumes"},
		{node: "hostpath-node-2", path: "/var/lib/hostpath/state.json", want: "/repo/.cluster/nodes/hostpath-node-2/state/state.json"},
		{node: "hostpath-node-1", path: "/var/lib/kubelet/pods/u/volumes", want: "/repo/.cluster/nodes/hostpath-node-1/kubelet/pods/u/volumes"},
		{node: "hostpath-node-1", path: "/var/hpvolumes/../etc/passwd", wantErr: true},
		{node: "hostpath-node-1", path: "/var/hpvolumesX/a", wantErr: true},
		{node: "../x", path: "/var/hpvolumes/a", wantErr: true},
		{node: "", path: "/var/hpvolumes/a", wantErr: true},
	}
	for _, tc := range tests {
		got, err := NodeDir(nodesDir, tc.node, tc.path)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("NodeDir(%q, %q) = %q, %v; want %q, error %v", tc.node, tc.path, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestRealNodes(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-node-2"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-node-1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-fake-1", Labels: map[string]string{FakeNodeLabel: "true"}}},
	)
	got, err := RealNodes(context.Background(), client)
	if want := []string{"hostpath-node-1", "hostpath-node-2"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("RealNodes = %v, %v; want %v", got, err, want)
	}
}
