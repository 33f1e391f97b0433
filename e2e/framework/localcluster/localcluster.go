// Package localcluster is what the e2e tests and tools know of the local
// cluster that scripts/cluster-up.sh runs: which nodes are real (run a
// kubelet) and which are fake (scripts/fake-nodes.sh, tools/internal/fakenodes),
// and where each node's host folders are on this machine
// (.cluster/nodes/<node>/..., bind-mounted on the node by
// scripts/node-start.sh).
package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// FakeNodeLabel marks the fake nodes (value "true"), which run no
	// kubelet and no provisioner; it is also the key of their NoSchedule
	// taint.
	FakeNodeLabel = "hostpath.dev/fake-node"
	// PoolPath is the default pool's path on every node.
	PoolPath = "/var/hpvolumes"
	// ExtraPoolPath is where a test may put a pool besides the default
	// one: a folder of each node's own, shared in the node's mount
	// namespace like PoolPath (scripts/cluster-lib.sh, NODE_BINDS).
	ExtraPoolPath = "/var/hpextra"
	// StatePath is the manager's state directory on a node.
	StatePath = "/var/lib/hostpath"
	// PoolRootPath is the managers' --pool-root: pools named only by a
	// StorageClass live below it.
	PoolRootPath = "/var/hppools"
	// KubeletPath is the kubelet's root directory on a node (pods and
	// their volume mount points).
	KubeletPath = "/var/lib/kubelet"
)

// nodeFolders maps each host path a node has its own copy of to the folder
// of .cluster/nodes/<node> that holds it (scripts/cluster-lib.sh, NODE_BINDS).
var nodeFolders = map[string]string{PoolPath: "hpvolumes", ExtraPoolPath: "hpextra", StatePath: "state", PoolRootPath: "hppools", KubeletPath: "kubelet"}

// RealNodes returns the names of the nodes without FakeNodeLabel=true,
// sorted; none is not an error.
func RealNodes(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: FakeNodeLabel + "!=true"})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}

// NodeDir maps hostPath, a path under PoolPath, ExtraPoolPath, StatePath,
// PoolRootPath or KubeletPath on node, to where that node's copy is on this machine, below
// nodesDir (.cluster/nodes): nodesDir/<node>/hpvolumes/..., .../state/...,
// .../hppools/... or .../kubelet/.... Mounts made inside the node's mount
// namespace (a pod's volumes) are not seen there.
func NodeDir(nodesDir, node, hostPath string) (string, error) {
	clean := filepath.Clean(hostPath)
	for base, folder := range nodeFolders {
		if clean == base || strings.HasPrefix(clean, base+"/") {
			if node == "" || strings.ContainsAny(node, "/\\") || node == "." || node == ".." {
				return "", fmt.Errorf("invalid node name %q", node)
			}
			return filepath.Join(nodesDir, node, folder, strings.TrimPrefix(clean, base)), nil
		}
	}
	return "", fmt.Errorf("%s is not under %s, %s, %s, %s or %s", hostPath, PoolPath, ExtraPoolPath, StatePath, PoolRootPath, KubeletPath)
}
