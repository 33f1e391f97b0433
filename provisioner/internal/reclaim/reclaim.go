// Package reclaim looks after volume directories once their PersistentVolume
// goes away, whoever deletes it, and keeps the deletion invariant: a
// directory that holds data is removed only when no PV refers to it and the
// last reclaim policy of the PV that owned it was Delete; a PV disappears
// only after every node that holds its directory has reached its final
// state (removed for Delete, marked retained for Retain or Recycle).
//
// Every pass over a PV has the shape of the host definer's controller:
// Facts -> NextStep -> one step.
//
//   - facts.go reads the Facts: what the PV says (where its directory
//     lives, whether Reclaim finished it moments ago) and, in the
//     Controller's pass, what the rule of who acts (package
//     responsibility) and the Nodes say of it, asked only as far as the
//     PV's state needs.
//   - next.go decides, with no side effect: NextStep(Facts) Step. Its
//     table test has a row for each clause of the deletion invariant.
//   - Small pieces carry a step out and feed the next decision: the
//     fan-out to the holders (holders.go, calls.go: their answers become
//     Facts.Answers and NextStep decides again), the finalizer
//     (finalizer.go: added, removed, or left for the library's DELETE),
//     the policy record (policy.go), the node-gone marks (nodegone.go) and
//     the scan for PVs no cache holds (nodegonescan.go), the memory of the
//     library's path (finished.go). steps.go runs the loop.
//
// One sequence takes a PV's directory to its final state (finalStep):
// one bounded parallel fan-out to the managers of the nodes that hold it,
// every answer read with managerapi.Classify; while a required node is not
// done, a Warning names the nodes and why, the finalizer
// hostpath.dev/directory-protection (hostpathv1.FinalizerDirectoryProtection)
// stays, and the PV is retried. Two paths take it, in this order for a
// claim deleted with policy Delete:
//
//  1. The library's Delete (provisioner.Provisioner.Delete, for a Released
//     PV with policy Delete) calls Controller.Reclaim (LibraryPath), which
//     returns nil once every required node is done, leaving the finalizer
//     on, and remembers the PV in memory (finishedSet: its UID, policy
//     Delete and location, for a few minutes). The library then DELETEs
//     the PV, once: Reclaim wrote nothing to the PV, so no watch event of
//     ours makes the library sync it again, and its shouldDelete is false
//     once the PV has a deletionTimestamp.
//  2. The Controller (ControllerPath: a PV under deletion that is not
//     Bound, on the instance that acts for it) removes the finalizer with
//     one JSON patch: at once for a PV that Reclaim remembers
//     (ActRemoveFinalizer), after the fan-out for any other (a PV deleted
//     by hand or by the node-gone handling, a restart, another instance, a
//     policy or location changed since). The PV then goes.
//
// A PV without the finalizer (made before it existed) is deleted by the
// library as soon as Reclaim returns nil.
//
// The Controller also records a changed reclaim policy with the directory
// on every node that holds it (hostpathv1.AnnotationRecordedPolicy says
// when it is done), adds the finalizer to the PVs of its node made without
// it, and looks after node-mode PVs whose Node object is gone (nodegone.go:
// the one exception to waiting for a node).
//
// A Sweeper removes, on its node, directories whose owner PV the API
// server says does not exist, by the reclaim policy in the owner record
// (sweepDecision); a directory whose PV exists is never removed, even when
// the PV names another pool or directory (a renamed pool): the PV gets a
// Warning DirectoryMisplaced instead.
//
// Why a finalizer of our own, not the library's AddFinalizer(true)
// (KEP-2644): in library v10 that finalizer is added only to PVs with
// policy Delete and removed (one more PATCH) from a PV whose policy is
// Retain or Recycle, so a Retain PV deleted by hand, or one patched to
// Retain, would go without its directory being marked retained on every
// node, and without waiting for a node whose manager is away. The API
// writes per volume are the same in the normal path (claim deleted, policy
// Delete): the library's costs a GET and a PATCH when the PV goes; ours is
// set in the PV the instance creates (no write) and removed with one JSON
// patch. Neither adds a write per volume at creation.
package reclaim

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// Reasons of the events this package emits.
const (
	// ReasonDirectoryRemoved is not an event: it is the reason logged (at
	// Info, with the message an event would have had) when the directory
	// was deleted, or was already gone, on every node. Nobody reads an
	// event on a PV that is gone a moment later, and each would cost an
	// API write per deleted volume.
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
// (*managerapi.Client implements it).
type Manager interface {
	// Host describes the node and lists its pools.
	Host(ctx context.Context) (*managerapi.Host, error)
	// ListVolumes lists a pool's volume directories with their owner
	// records.
	ListVolumes(ctx context.Context, pool string) (*managerapi.VolumeList, error)
	// DeleteVolume removes a directory owned by opts.Owner; a missing one
	// is a success.
	DeleteVolume(ctx context.Context, pool, name string, opts managerapi.DeleteOptions) error
	// SetOwner compares and swaps a directory's owner record.
	SetOwner(ctx context.Context, pool, name string, req managerapi.SetOwnerRequest) (*managerapi.Volume, error)
}

// TargetLister lists the nodes defined for a pool (*managers.Resolver):
// ready, whose HostDefinition of the pool is Ready and whose manager
// serves, and pending, being defined.
type TargetLister interface {
	// Targets returns the sorted ready and pending nodes of pool.
	Targets(pool string) (ready, pending []string, err error)
}

// directory is one volume directory on one node.
type directory struct {
	node, pool, name string
}

// location is where a PV's data lives: one directory of a pool, on one
// node in node mode, on every node the PV lists in multihost mode (those
// of hostpathv1.AnnotationNodes, made at creation or given since by the
// host definer, and of hostpathv1.AnnotationPendingNodes, still to get
// it).
type location struct{ hostpathv1.VolumeDirectory }

// locationOf returns where pv's directory lives, and false when pv is not
// a volume of one of the provisioner names (hostpathv1.VolumeDirectoryOf).
func locationOf(pv *v1.PersistentVolume, provisioner hostpathv1.ProvisionerNames) (location, bool) {
	d, ok := hostpathv1.VolumeDirectoryOf(pv, provisioner)
	return location{d}, ok
}

// holds reports whether dir, a directory on one node, is where l lives: a
// multihost PV's pool and name on any node, a node-mode PV's node, pool
// and name.
func (l location) holds(dir directory) bool {
	if l.Multihost {
		return l.Pool == dir.pool && l.Directory == dir.name
	}
	return l.at(l.Node) == dir
}

// at is l's directory on node.
func (l location) at(node string) directory {
	return directory{node: node, pool: l.Pool, name: l.Directory}
}

// String names the directory in events and errors.
func (l location) String() string {
	if l.Multihost {
		return fmt.Sprintf("directory %q in pool %q", l.Directory, l.Pool)
	}
	return l.at(l.Node).String()
}
