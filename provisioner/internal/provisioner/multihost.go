package provisioner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/provisioner/internal/annotations"
	"hostpath.dev/provisioner/internal/fanout"
)

// provisionMultihost makes a multihost claim's directory on every ready
// target of the class's pool (Targets: the nodes whose HostDefinition of
// the pool is Ready and whose manager serves), in parallel, and returns its
// PV once every one of them has it. The pending targets (definition
// PendingForCreation, or Ready without a serving manager) are recorded on
// the PV (annotations.PendingNodes) with a NodesPending event: the host
// definer gives them the directory when it defines them. A failure leaves
// the directories already made: their owner records name the PV, so the
// library's retry finishes the job, and the orphan sweeper removes them if
// the claim goes first. The scheduler's selected node does not restrict
// the volume.
func (p *Provisioner) provisionMultihost(ctx context.Context, opts controller.ProvisionOptions, params Parameters) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := opts.PVC
	if err := checkClaim(claim, annotations.ModeMultihost); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if _, ok := claim.Annotations[annotations.ReuseDirectory]; ok {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim annotation %s is not supported in mode %q: a multihost volume always gets a new directory from the pathPattern on every node; remove the annotation, or use a StorageClass of mode %q",
			annotations.ReuseDirectory, annotations.ModeMultihost, annotations.ModeNode)
	}
	size := claim.Spec.Resources.Requests[v1.ResourceStorage]
	requiredBytes, err := requestedBytes(size)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	dir, err := params.Directory(claim.Namespace, claim.Name, opts.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	where := fmt.Sprintf("directory %q in pool %q", dir, params.Pool)
	ready, pending, err := p.cfg.Targets.Targets(params.Pool)
	if err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("list the nodes for %s: %w; will retry", where, err)
	}
	switch {
	case len(ready) == 0 && len(pending) == 0:
		return nil, controller.ProvisioningInBackground, fmt.Errorf("create %s: no node has a Ready or defining (PendingForCreation) HostDefinition of pool %q: "+
			"the host definer defines the pool on the nodes that run a manager (see kubectl get hostdefinitions); will retry", where, params.Pool)
	case len(ready) == 0:
		return nil, controller.ProvisioningInBackground, fmt.Errorf("create %s: 0/%d nodes ready%s; will retry", where, len(pending), pendingText(pending))
	}
	req := client.CreateVolumeRequest{Owner: opts.PVName, Mode: params.DirMode, RequiredBytes: requiredBytes, ReclaimPolicy: string(reclaimPolicy(opts.StorageClass)), EnforceSize: params.EnforceSize}
	var mu sync.Mutex
	paths := map[string]string{}
	var enforcements []string
	results := p.fanOut(ctx, fanout.OperationCreate, ready, p.cfg.CreateFanout, func(ctx context.Context, node string) error {
		mgr, err := p.cfg.Managers(node)
		if err != nil {
			return err
		}
		vol, err := mgr.CreateVolume(ctx, params.Pool, dir, req)
		if err != nil {
			return err
		}
		mu.Lock()
		paths[node] = vol.Path
		enforcements = append(enforcements, vol.Enforcement)
		mu.Unlock()
		return nil
	})
	if state, err := createState(results, "create "+where, pending); err != nil {
		return nil, state, err
	}
	path, err := commonPath(paths, where)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	klog.FromContext(ctx).V(2).Info("Created the multihost volume directory", "nodes", ready, "pendingNodes", pending, "pool", params.Pool, "path", path)
	if len(pending) > 0 && p.cfg.Recorder != nil {
		p.cfg.Recorder.Eventf(claim, v1.EventTypeWarning, ReasonNodesPending,
			"Created %s on %d/%d nodes (%s); not yet on %s (HostDefinition of the pool PendingForCreation, or manager not Ready): the host definer gives each the directory when it defines it",
			where, len(ready), len(ready)+len(pending), strings.Join(ready, ", "), quoteAll(pending))
	}
	return buildPV(pvInput{
		name: opts.PVName, class: opts.StorageClass, claim: claim,
		pool: params.Pool, dir: dir, path: path, size: size,
		multihost: true, nodes: ready, pending: pending,
		enforcement: enforcementOf(enforcements...),
	}), controller.ProvisioningFinished, nil
}

// createState maps the results of a multihost create to the library's
// state: finished when every node succeeded; finished with an error naming
// the nodes when the directory belongs to another volume (or to none) on
// any node, as two claims never share a directory; otherwise in background
// with an error saying how many nodes are ready and why each other failed.
// what says what was done, pending are the nodes not called.
func createState(r fanout.Results, what string, pending []string) (controller.ProvisioningState, error) {
	failed := r.Failed()
	if len(failed) == 0 {
		return controller.ProvisioningFinished, nil
	}
	var conflicts, reasons []string
	for _, f := range failed {
		if owner, ok := conflictOwner(f.Err); ok {
			conflicts = append(conflicts, fmt.Sprintf("on node %q it belongs to %s", f.Node, ownerText(owner)))
			continue
		}
		reasons = append(reasons, fmt.Sprintf("node %q: %v", f.Node, nodeError(f.Err)))
	}
	if len(conflicts) > 0 {
		return controller.ProvisioningFinished, fmt.Errorf("%s: %s; two claims cannot share a directory: use a pathPattern with ${%s}",
			what, strings.Join(conflicts, "; "), VarVolumeName)
	}
	return controller.ProvisioningInBackground, fmt.Errorf("%s: %d/%d nodes ready%s; failed on %s; will retry",
		what, len(r.Nodes)-len(failed), len(r.Nodes), pendingText(pending), strings.Join(reasons, "; "))
}

// nodeError adds what to fix to a manager's error of one node.
func nodeError(err error) error {
	switch client.ReasonOf(err) {
	case client.ReasonUnauthorized, client.ReasonForbidden:
		return rbacError(err)
	}
	return err
}

// pendingText mentions the pending targets, or is "".
func pendingText(pending []string) string {
	if len(pending) == 0 {
		return ""
	}
	return fmt.Sprintf(" (pending: %s, HostDefinition of the pool PendingForCreation or manager not Ready)", quoteAll(pending))
}

// commonPath returns the one host path the managers report for a
// directory, and an error naming them when they disagree (a pool at
// different paths on different nodes, which one PV cannot express).
func commonPath(paths map[string]string, where string) (string, error) {
	nodes := make([]string, 0, len(paths))
	for n := range paths {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	if len(nodes) == 0 {
		return "", fmt.Errorf("no manager reported the host path of %s", where)
	}
	var seen []string
	for _, n := range nodes {
		seen = append(seen, fmt.Sprintf("%q on node %q", paths[n], n))
	}
	for _, n := range nodes[1:] {
		if paths[n] != paths[nodes[0]] {
			return "", fmt.Errorf("the managers report different host paths for %s: %s; a multihost volume needs the pool at the same path on every node", where, strings.Join(seen, ", "))
		}
	}
	return paths[nodes[0]], nil
}

// fanOut runs call for nodes with opts, retrying manager errors that may
// pass (retryable) unless opts says otherwise, and records the metrics of
// operation.
func (p *Provisioner) fanOut(ctx context.Context, operation string, nodes []string, opts fanout.Options, call func(context.Context, string) error) fanout.Results {
	if opts.Retryable == nil {
		opts.Retryable = retryable
	}
	r := fanout.Run(ctx, nodes, call, opts)
	p.cfg.FanoutMetrics.Observe(operation, r)
	return r
}

// retryable says whether a manager call may pass when tried again: no
// answer (transport errors, time limits, no Ready manager), 5xx and 429.
// Other 4xx answers stay the same.
func retryable(err error) bool {
	reason := client.ReasonOf(err)
	return reason == "" || reason == client.ReasonTooManyRequests || reason.HTTPStatus() >= 500
}

// deleteMultihost removes a multihost PV's directory from every node that
// may hold it (see deleteTargets), in parallel. A node where the
// directory is missing is done; one where it belongs to another PV (or to
// none) keeps it and counts as done. Any other failure, or a node the PV
// names whose manager is not Ready, fails the delete with an error naming
// those nodes: the library retries, and the PV stays until every node is
// done.
func (p *Provisioner) deleteMultihost(ctx context.Context, pv *v1.PersistentVolume) error {
	pool, dir := pv.Annotations[annotations.Pool], pv.Annotations[annotations.Directory]
	if pool == "" || dir == "" {
		return fmt.Errorf("volume %s lacks the annotations %s and %s: remove its directory from every node by hand and delete the volume", pv.Name, annotations.Pool, annotations.Directory)
	}
	where := fmt.Sprintf("directory %q in pool %q of PersistentVolume %q", dir, pool, pv.Name)
	call, waiting, gone, err := p.deleteTargets(pv)
	if err != nil {
		return fmt.Errorf("delete %s: %w", where, err)
	}
	var mu sync.Mutex
	var kept []string
	results := p.fanOut(ctx, fanout.OperationDelete, call, p.cfg.DeleteFanout, func(ctx context.Context, node string) error {
		mgr, err := p.cfg.Managers(node)
		if err != nil {
			return err
		}
		err = mgr.DeleteVolume(ctx, pool, dir, client.DeleteOptions{Owner: pv.Name})
		if owner, conflict := conflictOwner(err); conflict {
			mu.Lock()
			kept = append(kept, fmt.Sprintf("on node %q it belongs to %s", node, ownerText(owner)))
			mu.Unlock()
			return nil
		}
		return err
	})
	var failed []string
	for _, f := range results.Failed() {
		failed = append(failed, fmt.Sprintf("node %q: %v", f.Node, nodeError(f.Err)))
	}
	for _, n := range waiting {
		failed = append(failed, fmt.Sprintf("node %q: its manager is not Ready", n))
	}
	slices.Sort(kept)
	if len(failed) > 0 {
		total := len(call) + len(waiting)
		return fmt.Errorf("delete %s: %d/%d nodes done; not yet on %s; will retry", where, total-len(failed), total, strings.Join(failed, "; "))
	}
	klog.FromContext(ctx).V(2).Info("Deleted the multihost volume directory", "pv", pv.Name, "pool", pool, "directory", dir,
		"nodes", call, "goneNodes", gone, "keptElsewhere", kept)
	return nil
}

// deleteTargets returns the nodes that may hold a multihost PV's
// directory: those its annotations name, and the ready and pending targets
// of its pool (Targets), which the host definer may have given the
// directory without the PV saying so yet. call are those whose manager can
// be called now; waiting, the named ones whose manager cannot (they hold
// the directory, so the delete waits for them); gone, the named ones
// without a manager and without a Node object, which left for good and are
// skipped. A target the PV does not name and whose manager cannot be
// called is skipped too: a directory it may get later is an orphan, which
// its sweeper removes by the reclaim policy in the owner record.
func (p *Provisioner) deleteTargets(pv *v1.PersistentVolume) (call, waiting, gone []string, err error) {
	ready, pending, err := p.cfg.Targets.Targets(pv.Annotations[annotations.Pool])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list the nodes: %w", err)
	}
	named := append(annotations.SplitNodes(pv.Annotations[annotations.Nodes]), annotations.SplitNodes(pv.Annotations[annotations.PendingNodes])...)
	nodes := slices.Concat(named, ready, pending)
	slices.Sort(nodes)
	for _, n := range slices.Compact(nodes) {
		if _, err := p.cfg.Managers(n); err == nil {
			call = append(call, n)
			continue
		}
		if !slices.Contains(named, n) {
			continue
		}
		switch _, err := p.cfg.Nodes.Get(n); {
		case apierrors.IsNotFound(err):
			gone = append(gone, n)
		case err != nil:
			return nil, nil, nil, fmt.Errorf("get node %q from the cache: %w", n, err)
		default:
			waiting = append(waiting, n)
		}
	}
	return call, waiting, gone, nil
}
