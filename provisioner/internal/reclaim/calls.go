package reclaim

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/fanout"
)

// What one holder's manager is asked (operation.call), and how its answer
// is judged (judge): the states NextStep decides on.

// operation is what a fan-out asks each holder's manager.
type operation int

const (
	// opDelete removes the directory (reclaim policy Delete).
	opDelete operation = iota
	// opRetain marks the directory retained, policy Retain (reclaim
	// policy Retain or Recycle).
	opRetain
	// opRecordPolicy records the PV's reclaim policy in the owner record
	// of a PV in use.
	opRecordPolicy
)

// call makes op's manager call for pv's directory loc.
func (op operation) call(ctx context.Context, mgr Manager, pv *v1.PersistentVolume, loc location) error {
	switch op {
	case opDelete:
		return mgr.DeleteVolume(ctx, loc.Pool, loc.Directory, managerapi.DeleteOptions{Owner: pv.Name})
	case opRetain:
		_, err := mgr.SetOwner(ctx, loc.Pool, loc.Directory, managerapi.SetOwnerRequest{
			Owner: pv.Name, Previous: pv.Name, Retained: true, ReclaimPolicy: managerapi.ReclaimRetain})
		return err
	default:
		_, err := mgr.SetOwner(ctx, loc.Pool, loc.Directory, managerapi.SetOwnerRequest{
			Owner: pv.Name, Previous: pv.Name, ReclaimPolicy: hostpathv1.RecordedReclaimPolicy(pv)})
		return err
	}
}

// nodeState is where one holder stands after its call.
type nodeState int

const (
	// nodeDone: the directory reached the state asked for, or is not there.
	nodeDone nodeState = iota
	// nodeAbsent: the directory is not there (already removed).
	nodeAbsent
	// nodeKept: the directory belongs to another PV, or to none, and was
	// left alone; nothing more to do there.
	nodeKept
	// nodeWaiting: not done; the PV waits for this node.
	nodeWaiting
	// nodeSkipped: a node not required whose manager does not serve, or a
	// node that is gone: not called.
	nodeSkipped
)

// judge maps the answer err of one holder's manager to op's state there
// and, but for nodeDone, what to tell about it. required says whether the
// PV must wait for the node. A current manager answers a DELETE of a
// missing directory with success, so a 404 NotFound to a DELETE (an old
// manager's missing pool, a proxy's 404) is not taken for a removed
// directory on a node that must be done.
func judge(op operation, required bool, pool string, err error) (nodeState, string) {
	a := managerapi.Classify(err)
	switch a {
	case managerapi.AnswerOK:
		return nodeDone, ""
	case managerapi.AnswerVolumeMissing:
		if op == opDelete && required {
			return nodeWaiting, fmt.Sprintf("the manager answered 404 NotFound, not that the directory is gone: %v", err)
		}
		return nodeAbsent, ""
	case managerapi.AnswerOwnerConflict:
		if owner, _ := managerapi.OwnerOf(err); owner != "" {
			return nodeKept, fmt.Sprintf("it belongs to PersistentVolume %q", owner)
		}
		return nodeKept, "it has no owner record (remove it by hand if nothing else uses it)"
	case managerapi.AnswerPoolMissing:
		if !required {
			return nodeAbsent, ""
		}
		return nodeWaiting, fmt.Sprintf("pool %q is missing on the node (renamed, unmounted or removed?): %v", pool, err)
	case managerapi.AnswerDenied:
		return nodeWaiting, fmt.Sprintf("the manager rejected the provisioner (bind it to the ClusterRole %s): %v", managerapi.ClientClusterRole, err)
	}
	return nodeWaiting, err.Error()
}

// detailGone is the detail of a holder skipped because its Node is gone.
const detailGone = "the node no longer exists"

// nodeResult is one holder's state.
type nodeResult struct {
	node   string
	state  nodeState
	detail string
}

// metricName is the fan-out metrics' operation of op.
func (op operation) metricName() string {
	switch op {
	case opDelete:
		return fanout.OperationDelete
	case opRetain:
		return fanout.OperationRetain
	}
	return fanout.OperationRecordPolicy
}
