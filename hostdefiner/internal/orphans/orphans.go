// Package orphans is `kubectl hostpath orphans`: it compares, per node and
// pool, the volume directories the managers hold with the
// PersistentVolumes of the provisioner, and reports what does not match. It
// reads only: it lists PersistentVolumes, StorageClasses, the manager pods
// and the managers' CA bundle from the API server, asks for a token
// (TokenRequest) unless given one, and calls GET /v1/host and GET
// /v1/pools/{pool}/volumes on each manager. It never deletes or changes
// anything.
//
// The steps:
//
//  1. List the PVs of the provisioner (node mode: hostpath.dev/node, pool,
//     directory; multihost: pool and directory on every node of
//     hostpath.dev/nodes and hostpath.dev/pending-nodes) and its
//     StorageClasses (parameter pool).
//  2. Find each node's manager: the Ready manager pod's IP and the manager
//     port, or an address given by the operator (a port-forward). The nodes
//     are those of the manager pods, of the PVs and of the addresses given.
//  3. On each node with an address, verify the manager's certificate for
//     managerapi.ServerName(node) against the CA bundle, and list every pool
//     named by a PV, a StorageClass or the manager's own GET /v1/host.
//  4. List the PVs again, and classify (Classify): a directory no PV of
//     either list refers to is an orphan (or retained, when its owner was
//     deleted with Retain; misplaced, when its owner PV exists and refers
//     to another place, as after a pool was renamed); a PV of both lists whose directory is absent
//     from a node it should be on is missing (pending, for a node of
//     hostpath.dev/pending-nodes); a node or pool that could not be listed
//     is unreachable. The two lists keep a claim provisioned, or a PV
//     deleted, while the managers are listed from being reported.
package orphans

import (
	"context"
	"time"

	"hostpath.dev/api/managerapi"
)

// Kind is what a Finding says.
type Kind string

// The kinds of findings.
const (
	// KindOrphan is a directory on a node's pool that no PV refers to.
	KindOrphan Kind = "orphan"
	// KindRetained is a directory no PV refers to whose owner PV was
	// deleted with reclaim policy Retain: kept on purpose.
	KindRetained Kind = "retained"
	// KindMisplaced is a directory no PV refers to whose owner PV exists
	// and refers to another pool, directory or node (a pool renamed,
	// moved or swapped): the sweeper never removes it.
	KindMisplaced Kind = "misplaced"
	// KindMissing is a PV whose directory is not on a node it should be
	// on.
	KindMissing Kind = "missing"
	// KindPending is a multihost PV whose directory is not yet on a node
	// of its hostpath.dev/pending-nodes.
	KindPending Kind = "pending"
	// KindUnreachable is a node (or one pool of it) whose manager could not
	// be listed, so its findings are unknown.
	KindUnreachable Kind = "unreachable"
)

// Kinds lists the kinds in the order the summary gives them.
var Kinds = []Kind{KindOrphan, KindRetained, KindMisplaced, KindMissing, KindPending, KindUnreachable}

// Finding is one line of the report.
type Finding struct {
	// Node, Pool and Directory locate it; Pool is empty for a whole node
	// that is unreachable, Directory for an unreachable node or pool.
	Node      string `json:"node"`
	Pool      string `json:"pool,omitempty"`
	Directory string `json:"directory,omitempty"`
	// Kind is what was found.
	Kind Kind `json:"finding"`
	// Detail says it in words (the table's DETAIL column).
	Detail string `json:"detail"`
	// PV is the PersistentVolume that should have the directory (missing,
	// pending), and Claim its claim (namespace/name) when known.
	PV    string `json:"pv,omitempty"`
	Claim string `json:"claim,omitempty"`
	// Owner, OwnedSince, Retained and ReclaimPolicy are the directory's
	// owner record (orphan, retained).
	Owner         string     `json:"owner,omitempty"`
	OwnedSince    *time.Time `json:"ownedSince,omitempty"`
	Retained      bool       `json:"retained,omitempty"`
	ReclaimPolicy string     `json:"reclaimPolicy,omitempty"`
	// Error is why the node or pool could not be listed (unreachable).
	Error string `json:"error,omitempty"`
}

// Manager is what the report needs of one node's manager; *managerapi.Client
// is one.
type Manager interface {
	// Host is GET /v1/host (the manager's pools among others).
	Host(ctx context.Context) (*managerapi.Host, error)
	// ListVolumes is GET /v1/pools/{pool}/volumes.
	ListVolumes(ctx context.Context, pool string) (*managerapi.VolumeList, error)
}

var _ Manager = &managerapi.Client{}

// Dial returns the manager of node, served at address (host:port).
type Dial func(node, address string) (Manager, error)

// NodeListing is what one node's manager holds, or why it is unknown.
type NodeListing struct {
	// Node is the node's name.
	Node string
	// Address is where its manager was called (host:port); empty when it
	// has none.
	Address string
	// Err is why the node could not be listed at all (no Ready manager
	// pod, TLS, authentication, HTTP); Pools is then nil.
	Err error
	// Pools holds each pool asked for, by name.
	Pools map[string]PoolListing
}

// PoolListing is one pool of a node.
type PoolListing struct {
	// Volumes are the pool's directories.
	Volumes []managerapi.Volume
	// NotFound says the manager has no such pool (404): it holds no
	// directory there.
	NotFound bool
	// Err is why the pool could not be listed (other than NotFound).
	Err error
}

// NodeSummary is one node of a report: where its manager was called and
// which pools were looked at.
type NodeSummary struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Address is the manager's host:port; empty when it has none.
	Address string `json:"address,omitempty"`
	// Pools are the pools listed, sorted.
	Pools []string `json:"pools,omitempty"`
	// Error is why the node could not be listed.
	Error string `json:"error,omitempty"`
}

// Report is the outcome of a scan, what -o json prints.
type Report struct {
	// Provisioner is the provisioner names whose PVs and StorageClasses
	// were compared, comma-separated: --provisioner-name and
	// hostpathv1.CapacityProvisionerName.
	Provisioner string `json:"provisioner"`
	// Namespace is the product's namespace (manager pods, CA bundle).
	Namespace string `json:"namespace"`
	// Token says where the bearer token sent to the managers came from.
	Token string `json:"token"`
	// Nodes are the nodes looked at, sorted.
	Nodes []NodeSummary `json:"nodes"`
	// Findings are sorted by node, pool, directory.
	Findings []Finding `json:"findings"`
	// Counts has the number of findings of each kind, and "total".
	Counts map[string]int `json:"counts"`
}

// count fills r.Counts from r.Findings.
func (r *Report) count() {
	r.Counts = map[string]int{"total": len(r.Findings)}
	for _, k := range Kinds {
		r.Counts[string(k)] = 0
	}
	for _, f := range r.Findings {
		r.Counts[string(f.Kind)]++
	}
}
