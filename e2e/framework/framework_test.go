package framework

import "testing"

func TestNodeDir(t *testing.T) {
	f := &Framework{ClusterDir: "/repo/.cluster"}
	tests := []struct {
		node, path, want string
		wantErr          bool
	}{
		{node: "hostpath-node-1", path: "/var/hpvolumes/smoke-1/a.txt", want: "/repo/.cluster/nodes/hostpath-node-1/hpvolumes/smoke-1/a.txt"},
		{node: "hostpath-node-2", path: "/var/hpvolumes", want: "/repo/.cluster/nodes/hostpath-node-2/hpvolumes"},
		{node: "hostpath-node-2", path: "/var/lib/hostpath/state.json", want: "/repo/.cluster/nodes/hostpath-node-2/state/state.json"},
		{node: "hostpath-node-1", path: "/var/hpvolumes/../etc/passwd", wantErr: true},
		{node: "hostpath-node-1", path: "/var/hpvolumesX/a", wantErr: true},
		{node: "../x", path: "/var/hpvolumes/a", wantErr: true},
		{node: "", path: "/var/hpvolumes/a", wantErr: true},
	}
	for _, tc := range tests {
		got, err := f.NodeDir(tc.node, tc.path)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("NodeDir(%q, %q) = %q, %v; want %q, error %v", tc.node, tc.path, got, err, tc.want, tc.wantErr)
		}
	}
}
