package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/fanout"
)

// provisionMultihost makes a multihost claim's directory on every ready
// target of the class's pool (Targets: the nodes whose HostDefinition of
// the pool is Ready and whose manager serves), in parallel, and returns its
// PV once every one of them has it. The pending targets (definition
// PendingForCreation, or Ready without a serving manager) are recorded on
// the PV (hostpathv1.AnnotationPendingNodes) with a NodesPending event: the host
// definer gives them the directory when it defines them. A failure leaves
// the directories already made: their owner records name the PV, so the
// library's retry finishes the job, and the orphan sweeper removes them if
// the claim goes first. The scheduler's selected node does not restrict
// the volume.
func (p *Provisioner) provisionMultihost(ctx context.Context, opts controller.ProvisionOptions, params Parameters) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := opts.PVC
	if err := checkClaim(claim, hostpathv1.ModeMultihost); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if _, ok := claim.Annotations[hostpathv1.AnnotationReuseDirectory]; ok {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim annotation %s is not supported in mode %q: a multihost volume always gets a new directory from the pathPattern on every node; remove the annotation, or use a StorageClass of mode %q",
			hostpathv1.AnnotationReuseDirectory, hostpathv1.ModeMultihost, hostpathv1.ModeNode)
	}
	size := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if _, err := requestedBytes(size); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	src, err := p.cloneSource(ctx, claim, opts.StorageClass)
	if err == nil && src != nil && !src.dir.Multihost {
		err = invalidSource("the PersistentVolume %q of source claim %s is of mode %q: a multihost clone needs a multihost source", src.pv.Name, src.claim.Name, hostpathv1.ModeNode)
	}
	if err != nil {
		reportSource(p.cfg.Recorder, claim, err)
		return nil, cloneState(err), err
	}
	dir, err := params.Directory(claim.Namespace, claim.Name, opts.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := checkMultihostDirectory(dir, claim); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	where := fmt.Sprintf("directory %q in pool %q", dir, params.Pool)
	ready, pending, err := p.multihostTargets(params.Pool, where)
	if err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	pv := buildPV(pvInput{
		name: opts.PVName, class: opts.StorageClass, claim: claim,
		pool: params.Pool, dir: dir, size: size,
		local:     params.VolumeType == VolumeTypeLocal,
		multihost: true, nodes: ready, pending: pending,
	})
	makeOn, finished := p.multihostMaker(claim, src, pv, params, dir)
	var mu sync.Mutex
	paths := map[string]string{}
	var enforcements []string
	createOpts := p.cfg.CreateFanout
	createOpts.Retryable = func(err error) bool {
		mismatch := (*volumeMismatch)(nil)
		return !errors.As(err, &mismatch) && managerapi.Retryable(err)
	}
	results := p.fanOut(ctx, fanout.OperationCreate, ready, createOpts, func(ctx context.Context, node string) error {
		vol, err := makeOn(ctx, node)
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
	finished()
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
	setPath(pv, path)
	pv.Annotations[hostpathv1.AnnotationSizeEnforcement] = enforcementOf(enforcements...)
	return pv, controller.ProvisioningFinished, nil
}

// checkMultihostDirectory refuses a multihost directory name that does not
// carry the claim's UID. Any instance makes multihost PVs, so the API
// server's admission policy (manifests/base/policies) lets one name only a
// directory made for its own claim, which it tells by the UID in the name
// (the PV is named pvc-<UID>): a pathPattern without ${pv.metadata.name},
// or a name so long that shortening it cut the UID off, is refused here,
// before any directory is made, with what to change.
func checkMultihostDirectory(dir string, claim *v1.PersistentVolumeClaim) error {
	if claim.UID == "" || strings.Contains(dir, string(claim.UID)) {
		return nil
	}
	return &ParameterError{Parameter: ParamPathPattern, Problem: fmt.Sprintf(
		"the directory %q of a multihost volume must contain the claim's UID %s: use a pattern with %s, and shorter names if it is cut (a name is at most %d bytes)",
		dir, claim.UID, "${pv.metadata.name}", managerapi.MaxVolumeNameLength)}
}

// multihostTargets returns the nodes a multihost volume of pool goes to
// now (ready) and later (pending), or an error saying why there is none
// to call yet (where names the directory); the caller retries.
func (p *Provisioner) multihostTargets(pool, where string) (ready, pending []string, err error) {
	ready, pending, err = p.cfg.Targets.Targets(pool)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("list the nodes for %s: %w; will retry", where, err)
	case len(ready) == 0 && len(pending) == 0:
		return nil, nil, fmt.Errorf("create %s: no node has a Ready or defining (PendingForCreation) HostDefinition of pool %q: "+
			"the host definer defines the pool on the nodes that run a manager (see kubectl get hostdefinitions); will retry", where, pool)
	case len(ready) == 0:
		return nil, nil, fmt.Errorf("create %s: 0/%d nodes ready%s; will retry", where, len(pending), pendingText(pending))
	}
	return ready, pending, nil
}

// multihostMaker returns what makes pv's directory on one node: a new
// directory (the request names the claim, which another node's manager
// checks), or for a clone (src not nil) a copy of the node's directory of
// the source, followed with events on the claim (a copy that runs on
// after Config.CloneWait fails with errCloneRunning); and what reports,
// once every node made it, that the clone is finished. A volume that is
// not the one asked for (see checkCreated) is a *volumeMismatch.
func (p *Provisioner) multihostMaker(claim *v1.PersistentVolumeClaim, src *source, pv *v1.PersistentVolume, params Parameters, dir string) (makeOn func(ctx context.Context, node string) (*managerapi.Volume, error), finished func()) {
	if src == nil {
		req := hostpathv1.NewCreateVolumeRequest(pv, params.DirMode, params.EnforceSize)
		// Another node's manager makes a directory only for a claim it
		// can check, by name, at the API server.
		req.ClaimName = claim.Name
		return func(ctx context.Context, node string) (*managerapi.Volume, error) {
			mgr, err := p.cfg.Managers(node)
			if err != nil {
				return nil, err
			}
			vol, err := mgr.CreateVolume(ctx, params.Pool, dir, req)
			if err != nil {
				return nil, err
			}
			return vol, checkCreated(node, params.Pool, dir, req, vol)
		}, func() {}
	}
	f := p.newCloneFollower(claim, src)
	req := cloneRequest(pv, src, params.DirMode, params.EnforceSize)
	return func(ctx context.Context, node string) (*managerapi.Volume, error) {
		mgr, err := p.cfg.Managers(node)
		if err != nil {
			return nil, err
		}
		vol, err := p.follow(ctx, f, node, mgr, params.Pool, dir, req)
		if err != nil {
			return vol, err
		}
		return vol, checkCreated(node, params.Pool, dir, req.CreateVolumeRequest, vol)
	}, f.finished
}

// createState maps the results of a multihost create to the library's
// state: finished when every node succeeded; finished with an error naming
// the nodes when a node answered with a volume that is not the one asked
// for (a *volumeMismatch), or when the directory belongs to another volume
// (or to none) on any node, as two claims never share a directory;
// otherwise in background with an error saying how many nodes are ready
// and why each other failed. what says what was done, pending are the
// nodes not called.
func createState(r fanout.Results, what string, pending []string) (controller.ProvisioningState, error) {
	failed := r.Failed()
	if len(failed) == 0 {
		return controller.ProvisioningFinished, nil
	}
	var mismatches []error
	for _, f := range failed {
		if mismatch := (*volumeMismatch)(nil); errors.As(f.Err, &mismatch) {
			mismatches = append(mismatches, mismatch)
		}
	}
	if len(mismatches) > 0 {
		return controller.ProvisioningFinished, fmt.Errorf("%s: %w", what, errors.Join(mismatches...))
	}
	var conflicts, reasons []string
	for _, f := range failed {
		if owner, ok := managerapi.OwnerOf(f.Err); ok {
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
		opts.Retryable = managerapi.Retryable
	}
	r := fanout.Run(ctx, nodes, call, opts)
	p.cfg.FanoutMetrics.Observe(operation, r)
	return r
}
