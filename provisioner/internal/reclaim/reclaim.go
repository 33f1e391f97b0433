// Package reclaim looks after volume directories once their PersistentVolume
// goes away, whoever deletes it: a Controller holds every node-mode PV with
// the finalizer hostpath.dev/directory-protection (annotations.Finalizer)
// until the instance of the PV's node has removed the directory (reclaim
// policy Delete) or marked it retained (Retain, Recycle), and holds every
// multihost PV until the instance elected for it has done so on every node;
// a Sweeper removes directories whose owner record names a PersistentVolume
// that does not exist (by the policy the record keeps). Neither creates
// directories: the multihost directories a node lacks are given to it by
// the host definer when it defines the node for a pool.
//
// How a PV under deletion is handled (Controller):
//
//  1. Every instance sees the PV through the shared informer; PVs of other
//     provisioners, without the finalizer or not being deleted are ignored;
//     multihost PVs go to step 6 (a PV of this node that lacks the finalizer, made
//     before it existed, gets it with EnsureFinalizer, unless it is Released
//     or Failed: the provisioner's Delete takes the finalizer off a PV whose
//     directory it removed (Removed), just before the library deletes it).
//  2. While the PV is Bound nothing happens: Kubernetes' pv-protection
//     finalizer keeps it too, and no data is removed under a bound claim.
//  3. Only the instance of the PV's node (hostpath.dev/node) acts: with
//     policy Delete it deletes the directory through its manager, as the
//     PV's owner; with Retain or Recycle it marks the directory retained.
//     A directory that belongs to another PV is left alone, with a Warning
//     event. Then it removes the finalizer with a JSON patch that keeps the
//     other finalizers.
//  4. When the PV's node no longer exists, the one instance that rendezvous
//     hashing of the PV's UID elects removes the finalizer, with a Warning
//     event saying that the directory was not removed.
//  5. Every other instance writes nothing.
//  6. A multihost PV, once not Bound, is handled by the instance elected
//     for its UID alone: with Delete it deletes the directory on every node
//     the PV lists that still exists and on every node whose manager can be
//     found (the host definer may have given it the directory and not yet
//     recorded it on the PV; retrying, finalizer kept, while any of them
//     fails or a listed node has no manager); with Retain or Recycle it
//     marks it retained where it can; then it removes the finalizer.
//
// A node-mode PV whose Node object is deleted, not under deletion itself,
// is left alone unless the instances run with a node-gone grace period:
// then it is marked, and deleted once the grace period is over when its
// policy is Delete and it is not Bound (see nodegone.go).
//
// How orphans are found (Sweeper), on each node every period:
//
//  1. List the volumes of every pool of the node's manager.
//  2. A volume whose owner record names a PV that neither the cache nor a
//     live GET knows (or that names a PV of this provisioner pointing at
//     another directory), is not retained and was recorded longer ago than
//     the grace period, is deleted by the record's policy: Delete whatever
//     it holds, Retain never, none only if empty.
//  3. A non-empty orphan without a policy is kept and reported once per
//     process: a log line and a Warning event on the Node.
package reclaim

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/provisioner/internal/annotations"
)

// Reasons of the events this package emits.
const (
	// ReasonDirectoryRemoved (Normal, on the PV): the directory was
	// deleted, or was already gone.
	ReasonDirectoryRemoved = "DirectoryRemoved"
	// ReasonDirectoryRetained (Normal, on the PV): the directory keeps its
	// data and is marked retained in its owner record.
	ReasonDirectoryRetained = "DirectoryRetained"
	// ReasonDirectoryNotRemoved (Warning, on the PV): the directory was
	// not removed on some node: not yet (the message names the nodes the
	// PV waits for, and why), or not at all (another PV's directory, a
	// node gone for good).
	ReasonDirectoryNotRemoved = "DirectoryNotRemoved"
	// ReasonDirectoryNotRetained (Warning, on the PV): likewise, for a
	// directory to mark retained.
	ReasonDirectoryNotRetained = "DirectoryNotRetained"
	// ReasonReclaimPolicyPending (Warning, on the PV): the PV's reclaim
	// policy changed and is not recorded yet with its directory on the
	// nodes the message names.
	ReasonReclaimPolicyPending = "ReclaimPolicyPending"
	// ReasonDirectoryMisplaced (Warning, on the PV): a node holds a
	// directory whose owner record names this PV, in another pool or
	// under another name than the PV says (a pool renamed, moved or
	// swapped): it is kept, never removed, until the operator sorts it
	// out.
	ReasonDirectoryMisplaced = "DirectoryMisplaced"
	// ReasonOrphanedDirectory (Warning, on the Node): a directory whose
	// owner PV does not exist still holds data, so it was kept.
	ReasonOrphanedDirectory = "OrphanedDirectory"
)

// Manager is what this package needs of a node's manager
// (*client.Client implements it).
type Manager interface {
	// Host describes the node and lists its pools.
	Host(ctx context.Context) (*client.Host, error)
	// ListVolumes lists a pool's volume directories with their owner
	// records.
	ListVolumes(ctx context.Context, pool string) (*client.VolumeList, error)
	// DeleteVolume removes a directory owned by opts.Owner; a missing one
	// is a success.
	DeleteVolume(ctx context.Context, pool, name string, opts client.DeleteOptions) error
	// SetOwner compares and swaps a directory's owner record.
	SetOwner(ctx context.Context, pool, name string, req client.SetOwnerRequest) (*client.Volume, error)
}

// TargetLister lists the nodes defined for a pool (*managers.Resolver):
// ready, whose HostDefinition of the pool is Ready and whose manager
// serves, and pending, being defined.
type TargetLister interface {
	// Targets returns the sorted ready and pending nodes of pool.
	Targets(pool string) (ready, pending []string, err error)
}

// Instances elects, without a leader, the instance that acts for an object
// (*ownership.Instances implements it).
type Instances interface {
	// IsOwner reports whether this instance is the one elected for key
	// among the live instances.
	IsOwner(key string) (bool, error)
}

// directory is where a node-mode PV's data lives.
type directory struct {
	node, pool, name string
}

// nodeDirectory returns the directory of pv, and false when pv is not a
// node-mode volume of provisioner. A PV without the mode annotation counts
// as node mode; one with any other value than annotations.ModeNode does not.
func nodeDirectory(pv *v1.PersistentVolume, provisioner string) (directory, bool) {
	if pv.Annotations[annotations.ProvisionedBy] != provisioner {
		return directory{}, false
	}
	if mode := pv.Annotations[annotations.Mode]; mode != "" && mode != annotations.ModeNode {
		return directory{}, false
	}
	return directory{
		node: pv.Annotations[annotations.Node],
		pool: pv.Annotations[annotations.Pool],
		name: pv.Annotations[annotations.Directory],
	}, true
}
