package reclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/fanout"
)

// The one way a PV's directory reaches its final state
// (Controller.reclaimOutcome, which the library's Delete reaches through
// Controller.Reclaim and the finalizer controller through
// Controller.finalize), and the one way its owner records follow its
// reclaim policy (Controller.recordPolicy):
//
//  1. holders: the nodes that may hold the directory, each required (the PV
//     waits for it) or not. Node mode: the PV's node, required while its
//     Node exists. Multihost: every node the PV lists (hostpath.dev/nodes
//     and hostpath.dev/pending-nodes), required while its Node exists, and
//     every other node with a Ready or defining HostDefinition of the pool
//     (the host definer may have given it the directory without the PV
//     saying so yet), called when its manager serves. A listed node whose
//     Node object is gone is skipped: gone for good, the only exception.
//  2. One bounded parallel fan-out (package fanout, on
//     workqueue.ParallelizeUntil) makes one call per holder: with reclaim
//     policy Delete, DELETE ...?owner={pv}; otherwise the owner record is
//     marked retained with policy Retain; to follow a policy change, the
//     record gets the PV's policy.
//  3. judge maps each answer (client.Classify) to done, kept (another
//     owner's directory, left alone) or waiting. A required node without a
//     serving manager, or whose pool is missing, is waiting: a missing pool
//     is not a removed directory.
//  4. While any node is waiting, a Warning names every waiting node and
//     why, the finalizer stays, and the PV is retried. Once none is, the
//     PV may go, and only the finalizer controller removes the finalizer
//     (finalize), in this order:
//     - The library's path (Reclaim, from provisioner.Provisioner.Delete,
//     for a Released PV with policy Delete): Reclaim reports the outcome,
//     remembers the PV (finishedSet: UID, policy Delete, location, for
//     finishedTTL) and returns nil, leaving the finalizer on. The library
//     then DELETEs the PV (its one DELETE: its shouldDelete is false for a
//     PV with a deletionTimestamp), which puts it under deletion with the
//     finalizer; the finalizer controller's pass on it finds it
//     remembered and removes the finalizer with one JSON patch, without
//     calling the managers again.
//     - Any other PV under deletion with the finalizer that is not Bound
//     (deleted by hand or by nodegone.go, or one this process does not
//     remember: after a restart, on another instance, its policy or
//     location changed, remembered too long ago): finalize runs steps 1
//     to 3 and removes the finalizer only once no node is waiting, so the
//     managers have confirmed the directory's final state before the PV
//     goes.
//     A PV made before the finalizer existed, without it, is deleted by the
//     library as soon as Reclaim returns nil.

// pvProtectionFinalizer is kube-controller-manager's finalizer on every PV
// (the StorageObjectInUseProtection admission plugin adds it), which its
// pv-protection controller removes once the PV is not Bound.
const pvProtectionFinalizer = "kubernetes.io/pv-protection"

// pvProtectionWait bounds how long finalize leaves the finalizer of a
// remembered PV on for pvProtectionFinalizer to go first.
const pvProtectionWait = 30 * time.Second

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

// finalOperation is the operation that takes pv's directory to its final
// state, by the PV's reclaim policy now.
func finalOperation(pv *v1.PersistentVolume) operation {
	if pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
		return opDelete
	}
	return opRetain
}

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

// holder is a node that may hold a PV's directory.
type holder struct {
	node string
	// required: the PV waits until this node has answered for good.
	required bool
	// gone: a node the PV names whose Node object no longer exists; it is
	// not called and the PV does not wait for it.
	gone bool
}

// holders returns, sorted, the nodes that may hold loc (step 1 above).
func (c *Controller) holders(loc location) ([]holder, error) {
	if !loc.Multihost {
		if loc.Node == "" {
			return nil, nil
		}
		exists, err := c.nodeExists(loc.Node)
		if err != nil {
			return nil, err
		}
		return []holder{{node: loc.Node, required: exists, gone: !exists}}, nil
	}
	named := slices.Concat(loc.Nodes, loc.PendingNodes)
	var defined []string
	if c.cfg.Targets != nil {
		ready, pending, err := c.cfg.Targets.Targets(loc.Pool)
		if err != nil {
			return nil, fmt.Errorf("list the nodes of pool %q: %w", loc.Pool, err)
		}
		defined = slices.Concat(ready, pending)
	}
	all := slices.Concat(named, defined)
	slices.Sort(all)
	var out []holder
	for _, n := range slices.Compact(all) {
		if !slices.Contains(named, n) {
			out = append(out, holder{node: n})
			continue
		}
		exists, err := c.nodeExists(n)
		if err != nil {
			return nil, err
		}
		out = append(out, holder{node: n, required: exists, gone: !exists})
	}
	return out, nil
}

// nodeExists reports whether the Node of node exists (Config.Nodes, which
// says missing only on the API server's answer of now: every step that
// writes because a Node is gone, a mark, a PV deleted, a finalizer
// removed without the directory's removal, acts on this answer).
func (c *Controller) nodeExists(node string) (bool, error) {
	exists, err := c.nodes.Exists(node)
	if err != nil {
		return false, fmt.Errorf("look Node %q up: %w", node, err)
	}
	return exists, nil
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

// fanOut makes op's call on every holder of loc, in parallel (step 2),
// and returns each holder's state.
func (c *Controller) fanOut(ctx context.Context, op operation, pv *v1.PersistentVolume, loc location, holders []holder) []nodeResult {
	results := make([]nodeResult, len(holders))
	index := map[string]int{}
	var call []string
	for i, h := range holders {
		results[i] = nodeResult{node: h.node, state: nodeSkipped}
		if h.gone {
			results[i].detail = detailGone
			continue
		}
		index[h.node] = i
		call = append(call, h.node)
	}
	opts := c.cfg.Fanout
	opts.Retryable = managerapi.Retryable
	r := fanout.Run(ctx, call, func(ctx context.Context, node string) error {
		mgr, err := c.cfg.Managers(node)
		if err != nil {
			return fmt.Errorf("no manager serves: %w", err)
		}
		return op.call(ctx, mgr, pv, loc)
	}, opts)
	c.cfg.FanoutMetrics.Observe(op.metricName(), r)
	for _, nr := range r.Nodes {
		i := index[nr.Node]
		h := holders[i]
		if nr.Err != nil && managerapi.Classify(nr.Err) == managerapi.AnswerUnreachable && !h.required {
			// A node that may hold the directory but cannot be asked: its
			// sweeper acts by the owner record once the PV is gone.
			results[i] = nodeResult{node: h.node, state: nodeSkipped, detail: nr.Err.Error()}
			continue
		}
		state, detail := judge(op, h.required, loc.Pool, nr.Err)
		results[i] = nodeResult{node: h.node, state: state, detail: detail}
	}
	return results
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

// Reclaim is the library's path (provisioner.Provisioner.Delete, on the
// instance its DeletionGuard chose, for a Released PV with policy Delete):
// the library DELETEs the PV itself as soon as Reclaim returns nil.
// Reclaim takes the directory of pv, a PV of this provisioner that is not
// Bound, to its final state on every node that holds it (reclaim policy
// Delete: removed; otherwise: marked retained) and reports what was done;
// it does not remove pv's finalizer. Once no node is waiting it remembers
// pv (policy Delete only: see finishedSet) and returns nil; the library's
// DELETE then puts pv under deletion, and the Controller's pass removes
// the finalizer without asking the managers again (finalize). While a node
// that holds the directory is not done, Reclaim emits a Warning naming
// the nodes and returns an error, to be retried, and remembers nothing. A
// PV remembered already (the library syncs it again before its DELETE
// went through) returns nil at once.
func (c *Controller) Reclaim(ctx context.Context, pv *v1.PersistentVolume) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pv", klog.KObj(pv))
	ctx = klog.NewContext(ctx, logger)
	loc, ours := locationOf(pv, c.cfg.ProvisionerNames)
	if ours && c.finished.has(pv, loc) {
		logger.V(4).Info("The directory reached its final state here already; the library deletes the PersistentVolume")
		return nil
	}
	o := c.reclaimOutcome(ctx, pv)
	if !o.release {
		return c.finish(ctx, pv, o)
	}
	report(ctx, c.cfg.Recorder, pv, o)
	if ours {
		c.finished.add(pv, loc)
	}
	logger.V(2).Info("The directory reached its final state; the library deletes the PersistentVolume, then the finalizer comes off",
		"finalizer", hostpathv1.FinalizerDirectoryProtection, "outcome", o.message)
	return nil
}

// finalize is the Controller's path for pv, a PV of this provisioner
// under deletion that is not Bound, with the finalizer, on the instance
// that acts for it; loc is where its directory lives. A PV that Reclaim
// remembers (finishedSet) only loses its finalizer: the managers answered
// for it moments ago. Any other goes through steps 1 to 3, and its
// finalizer comes off only when no node is waiting (finish).
//
// A remembered PV that still carries kube-controller-manager's finalizer
// kubernetes.io/pv-protection keeps ours until that one is gone, for at
// most pvProtectionWait after its deletion: the controller removes its
// finalizer with an update, which a patch of ours landing first would make
// conflict and repeat (343 more PV updates in 1,000 deletions, 2026-11-27).
// Its update changes the PV, which brings the PV back here.
func (c *Controller) finalize(ctx context.Context, pv *v1.PersistentVolume, loc location) error {
	if !c.finished.has(pv, loc) {
		return c.finish(ctx, pv, c.reclaimOutcome(ctx, pv))
	}
	if slices.Contains(pv.Finalizers, pvProtectionFinalizer) && pv.DeletionTimestamp != nil {
		if wait := pvProtectionWait - c.clock.Since(pv.DeletionTimestamp.Time); wait > 0 {
			c.queue.AddAfter(pv.Name, wait)
			return nil
		}
	}
	if err := removeFinalizer(ctx, c.cfg.Client, pv, c.cfg.FieldManager); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Removed the finalizer; the directory reached its final state here before the library deleted the PersistentVolume",
		"finalizer", hostpathv1.FinalizerDirectoryProtection)
	return nil
}

// reclaimOutcome runs steps 1 to 3 for pv's final state and says what
// becomes of the PV.
func (c *Controller) reclaimOutcome(ctx context.Context, pv *v1.PersistentVolume) outcome {
	loc, ok := locationOf(pv, c.cfg.ProvisionerNames)
	if !ok {
		return release("", "", "not a volume of this provisioner")
	}
	if loc.Pool == "" || loc.Directory == "" {
		return release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The PersistentVolume names no pool or directory (annotations %s, %s): nothing was removed",
			hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory))
	}
	if !loc.Multihost && loc.Node == "" {
		return release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The PersistentVolume names no node (annotation %s): no directory was removed", hostpathv1.AnnotationNode))
	}
	holders, err := c.holders(loc)
	if err != nil {
		return outcome{err: err}
	}
	op := finalOperation(pv)
	return finalOutcome(op, loc, c.fanOut(ctx, op, pv, loc, holders))
}

// finalOutcome sums the holders' states up (step 4): retry while any is
// waiting, else release with a message saying where the directory went (or
// was already gone), where it was kept, and which gone nodes were skipped:
// a Warning event when some node kept it or was skipped, a Normal
// DirectoryRetained event when it was marked retained, and only a log line
// (reason DirectoryRemoved) when it was removed everywhere.
// A node-mode PV's messages name its one node once, in the location.
func finalOutcome(op operation, loc location, results []nodeResult) outcome {
	var done, absent, gone, kept, waiting []string
	item := func(r nodeResult) string {
		if !loc.Multihost {
			return r.detail
		}
		return fmt.Sprintf("node %q: %s", r.node, r.detail)
	}
	for _, r := range results {
		switch {
		case r.state == nodeDone:
			done = append(done, r.node)
		case r.state == nodeAbsent:
			absent = append(absent, r.node)
		case r.state == nodeKept:
			kept = append(kept, item(r))
		case r.state == nodeWaiting:
			waiting = append(waiting, item(r))
		case r.detail == detailGone:
			gone = append(gone, r.node)
		}
	}
	on := func(nodes []string) string {
		if !loc.Multihost {
			return ""
		}
		return " on " + fanout.NodeList(nodes)
	}
	verb, failReason := "removed", ReasonDirectoryNotRemoved
	if op == opRetain {
		verb, failReason = "marked retained", ReasonDirectoryNotRetained
	}
	if len(waiting) > 0 {
		msg := fmt.Sprintf("the %s is not %s yet: %s", loc, verb, strings.Join(waiting, "; "))
		return outcome{err: errors.New(msg), eventType: v1.EventTypeWarning, reason: failReason, message: fmt.Sprintf(
			"Waiting before the PersistentVolume can go: %s; the finalizer %s stays until then (will retry)", msg, hostpathv1.FinalizerDirectoryProtection)}
	}
	var parts []string
	switch {
	case len(done) > 0 && op == opDelete:
		parts = append(parts, fmt.Sprintf("removed the %s%s", loc, on(done)))
	case len(done) > 0:
		parts = append(parts, fmt.Sprintf("the %s keeps its data%s, marked retained: remove it by hand when done", loc, on(done)))
	}
	if len(absent) > 0 {
		parts = append(parts, fmt.Sprintf("the %s was already gone%s", loc, on(absent)))
	}
	if len(kept) > 0 {
		parts = append(parts, fmt.Sprintf("the %s was left in place: %s", loc, strings.Join(kept, "; ")))
	}
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("the %s was not %s on %s: the node no longer exists", loc, verb, fanout.NodeList(gone)))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("no node held the %s", loc))
	}
	msg := strings.Join(parts, "; ")
	msg = strings.ToUpper(msg[:1]) + msg[1:]
	switch {
	case len(kept) > 0 || len(gone) > 0:
		return release(v1.EventTypeWarning, failReason, msg)
	case op == opRetain && len(done) == 0:
		return release("", "", msg) // nothing was there to retain: logged only
	case op == opDelete:
		// Logged, not an event: the PV goes a moment later.
		return release("", ReasonDirectoryRemoved, msg)
	}
	return release(v1.EventTypeNormal, ReasonDirectoryRetained, msg)
}

// policyRecorded reports whether every node holding pv's directory is
// known to record pv's reclaim policy (hostpathv1.AnnotationRecordedPolicy says the
// policy they record).
func policyRecorded(pv *v1.PersistentVolume) bool {
	recorded, ok := pv.Annotations[hostpathv1.AnnotationRecordedPolicy]
	return ok && recorded == hostpathv1.RecordedReclaimPolicy(pv)
}

// recordPolicy makes the owner record of pv's directory on every node that
// holds it say pv's reclaim policy, then says so on the PV
// (hostpathv1.AnnotationRecordedPolicy, a merge patch guarded by the
// resourceVersion). While a node that holds it has not recorded it, a
// Warning names the nodes and the PV is retried: a directory whose PV went
// while its node was away is removed by its sweeper only if the record
// says Delete.
func (c *Controller) recordPolicy(ctx context.Context, pv *v1.PersistentVolume) error {
	loc, ok := locationOf(pv, c.cfg.ProvisionerNames)
	if !ok || loc.Pool == "" || loc.Directory == "" {
		return nil
	}
	holders, err := c.holders(loc)
	if err != nil {
		return err
	}
	policy := hostpathv1.RecordedReclaimPolicy(pv)
	var waiting, done []string
	for _, r := range c.fanOut(ctx, opRecordPolicy, pv, loc, holders) {
		switch {
		case r.state == nodeWaiting && loc.Multihost:
			waiting = append(waiting, fmt.Sprintf("node %q: %s", r.node, r.detail))
		case r.state == nodeWaiting:
			waiting = append(waiting, r.detail)
		case r.state == nodeDone:
			done = append(done, r.node)
		}
	}
	if len(waiting) > 0 {
		msg := fmt.Sprintf("Reclaim policy %s is not recorded yet with the %s: %s (will retry)", policy, loc, strings.Join(waiting, "; "))
		c.cfg.Recorder.Event(pv, v1.EventTypeWarning, ReasonReclaimPolicyPending, msg)
		return fmt.Errorf("PersistentVolume %q: %s", pv.Name, msg)
	}
	if err := patchAnnotation(ctx, c.cfg.Client, pv, c.cfg.FieldManager, hostpathv1.AnnotationRecordedPolicy, &policy); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Recorded the reclaim policy with the directory", "reclaimPolicy", policy, "nodes", done)
	return nil
}
