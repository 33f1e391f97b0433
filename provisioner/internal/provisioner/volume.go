package provisioner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/util"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// supportedAccessModes are the access modes one node's directory can serve.
var supportedAccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadWriteOncePod, v1.ReadOnlyMany}

// multihostAccessModes are the access modes of a multihost volume: pods on
// any node share the claim, each using its own node's copy.
var multihostAccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteMany, v1.ReadWriteOnce, v1.ReadWriteOncePod, v1.ReadOnlyMany}

// Provision creates the claim's directory through this node's manager and
// returns its PV; a multihost claim's, through every node's manager (see
// provisionMultihost). The directory is the expanded pathPattern, or the one the
// claim's hostpathv1.AnnotationReuseDirectory names; the manager records the PV as
// its owner, so a directory of another PV is never handed out.
//
// Before anything else, a claim whose selected node was deleted goes back
// to the scheduler (selectedNodeDeleted); its other failures say the
// claim's StorageClass first (provisionFailed). The library did both
// itself, around the call of Provision, the first up to v12, the second
// up to v11.0: the claims' ProvisioningFailed events say what they said
// under v10.
func (p *Provisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if err := p.selectedNodeDeleted(ctx, opts); err != nil {
		return nil, controller.ProvisioningReschedule, err
	}
	pv, state, err := p.provision(ctx, opts)
	return pv, state, provisionFailed(opts.PVC, err)
}

// selectedNodeDeleted returns the NotFound of the claim's selected node
// (opts.SelectedNodeName, the scheduler's) when that Node was deleted and
// this instance gives the claim back to the scheduler (decide: verdict
// reschedule), or nil. The library removes selected-node on
// ProvisioningReschedule. A node without an instance is answered the same
// way, but after the checks of the class and the claim
// (provisionElsewhere), as before.
func (p *Provisioner) selectedNodeDeleted(ctx context.Context, opts controller.ProvisionOptions) error {
	if opts.SelectedNodeName == "" || opts.SelectedNodeName == p.cfg.Node ||
		opts.StorageClass.Parameters[hostpathv1.ParamMode] == hostpathv1.ModeMultihost {
		// Only a node-mode claim goes back to the scheduler (decide); the
		// common case, a claim of this node or a multihost one, asks
		// nothing more here.
		return nil
	}
	d, err := p.decide(ctx, opts.PVC)
	if err != nil || d.verdict != reschedule || d.gone.reason != ReasonNodeNotFound || d.choice.node != opts.SelectedNodeName {
		// An error of the election is Provision's to report
		// (provisionElsewhere).
		return nil
	}
	return apierrors.NewNotFound(v1.Resource("node"), d.choice.node)
}

// provisionFailed is err, a failure of Provision, as the ProvisioningFailed
// event of the claim says it: after the claim's StorageClass, as the
// library said it up to v11.0. An IgnoredError is passed on as it is: the
// library asserts its type, as it did before it added the StorageClass.
func provisionFailed(claim *v1.PersistentVolumeClaim, err error) error {
	if _, ignored := err.(*controller.IgnoredError); ignored || err == nil {
		return err
	}
	return fmt.Errorf("failed to provision volume with StorageClass %q: %w", util.GetPersistentVolumeClaimClass(claim), err)
}

// provision is Provision but for what the library did around it up to
// v12 (selectedNodeDeleted, provisionFailed).
func (p *Provisioner) provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	claim := opts.PVC
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pvc", klog.KObj(claim), "pv", opts.PVName)
	ctx = klog.NewContext(ctx, logger)

	params, err := ParseParameters(opts.StorageClass.Parameters)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := checkClass(opts.StorageClass, params); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if params.Mode == hostpathv1.ModeMultihost {
		return p.provisionMultihost(ctx, opts, params)
	}
	if err := checkClaim(claim, params.Mode); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	src, err := p.cloneSource(ctx, claim, opts.StorageClass)
	if err != nil {
		reportSource(p.cfg.Recorder, claim, err)
		return nil, cloneState(err), err
	}
	choice := chooseNode(claim, src)
	if choice.node != p.cfg.Node {
		return p.provisionElsewhere(ctx, claim)
	}
	hostname, state, err := p.hostname(opts.StorageClass)
	if err != nil {
		return nil, state, err
	}
	size := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if _, err := requestedBytes(size); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	dir, reuse, err := claimDirectory(params, claim, opts.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// Another node has neither the directory to reuse nor its owner.
	reschedulable := !choice.pinned() && !reuse

	mgr, err := p.cfg.Managers(p.cfg.Node)
	if err != nil {
		// No manager to call yet, whatever the cause: not an answer of
		// the manager, so no state of provisioningState.
		return nil, controller.ProvisioningInBackground, fmt.Errorf("%w; will retry", err)
	}
	pv := buildPV(pvInput{
		name:     opts.PVName,
		class:    opts.StorageClass,
		claim:    claim,
		node:     p.cfg.Node,
		hostname: hostname,
		pool:     params.Pool,
		dir:      dir,
		size:     size,
		local:    params.VolumeType == VolumeTypeLocal,
	})
	if reuse {
		if state, err := p.reuseDirectory(ctx, mgr, params.Pool, dir, pv); err != nil {
			return nil, state, err
		}
	}
	vol, err := p.makeDirectory(ctx, mgr, claim, src, params, dir, pv)
	if errors.Is(err, errCloneRunning) {
		return nil, controller.ProvisioningInBackground, err
	}
	if mismatch := (*volumeMismatch)(nil); errors.As(err, &mismatch) {
		return nil, controller.ProvisioningFinished, err
	}
	if err != nil {
		state, err := provisioningState(p.createError(err, params.Pool, dir), reschedulable)
		return nil, state, err
	}
	logger.V(2).Info("Created the volume directory", "node", p.cfg.Node, "pool", params.Pool, "path", vol.Path, "reused", reuse)
	setPath(pv, vol.Path)
	pv.Annotations[hostpathv1.AnnotationSizeEnforcement] = enforcementOf(vol.Enforcement)
	return pv, controller.ProvisioningFinished, nil
}

// makeDirectory has this node's manager make the directory of pv: a new
// one, or for a clone (src not nil) a copy of the source's, followed with
// events on the claim. A volume that is not the one asked for (see
// checkCreated) is a *volumeMismatch.
func (p *Provisioner) makeDirectory(ctx context.Context, mgr VolumeManager, claim *v1.PersistentVolumeClaim, src *source, params Parameters, dir string, pv *v1.PersistentVolume) (*managerapi.Volume, error) {
	if src == nil {
		req := hostpathv1.NewCreateVolumeRequest(pv, params.DirMode, params.EnforceSize)
		vol, err := mgr.CreateVolume(ctx, params.Pool, dir, req)
		if err != nil {
			return nil, err
		}
		return vol, checkCreated(p.cfg.Node, params.Pool, dir, req, vol)
	}
	f := p.newCloneFollower(claim, src)
	req := cloneRequest(pv, src, params.DirMode, params.EnforceSize)
	vol, err := p.follow(ctx, f, p.cfg.Node, mgr, params.Pool, dir, req)
	if err != nil {
		return vol, err
	}
	if err := checkCreated(p.cfg.Node, params.Pool, dir, req.CreateVolumeRequest, vol); err != nil {
		return nil, err
	}
	f.finished()
	return vol, nil
}

// volumeMismatch is a manager's answer to a create that is not the volume
// asked for: another owner, mode or claim namespace. A current manager
// never answers so (a create that meets another record is 409), an older
// one may: it confirmed an owner record it found instead of refusing it,
// one another node may have planted. The provisioning fails for good:
// the directory is not this claim's.
type volumeMismatch struct {
	node, pool, dir string
	// diffs say what differs, "owner "x", not "y"" and alike.
	diffs []string
}

// Error says where and what differs.
func (e *volumeMismatch) Error() string {
	return fmt.Sprintf("the manager of node %q answered the create of directory %q in pool %q with a volume that is not the one asked for: %s; its owner record was not made for this claim (planted by another node, or left by an older version): check it, and remove it by hand if nothing uses it",
		e.node, e.dir, e.pool, strings.Join(e.diffs, ", "))
}

// checkCreated returns a *volumeMismatch when vol, a manager's answer to
// the create req of directory dir of pool on node, has another owner, mode
// (multihost or not) or claim namespace than req asked for.
func checkCreated(node, pool, dir string, req managerapi.CreateVolumeRequest, vol *managerapi.Volume) error {
	if vol == nil {
		return &volumeMismatch{node: node, pool: pool, dir: dir, diffs: []string{"no volume at all"}}
	}
	diffs := req.Differences(vol.Owner, vol.Multihost, vol.ClaimNamespace)
	if len(diffs) == 0 {
		return nil
	}
	return &volumeMismatch{node: node, pool: pool, dir: dir, diffs: diffs}
}

// provisionElsewhere answers Provision for a claim of another node: it
// gives the claim back to the scheduler when this instance is elected to
// (decideElsewhere), and otherwise leaves it to the node's own instance
// (the claim changed since ShouldProvision).
func (p *Provisioner) provisionElsewhere(ctx context.Context, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	d, err := p.decide(ctx, claim)
	if err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("%w; will retry", err)
	}
	if d.verdict == reschedule {
		return nil, controller.ProvisioningReschedule, errors.New(rescheduleMessage(d))
	}
	return nil, controller.ProvisioningFinished, &controller.IgnoredError{Reason: fmt.Sprintf("the claim belongs to node %q", d.choice.node)}
}

// hostname returns this node's hostname label, which the PV's node
// affinity names, once the node is in the class's allowedTopologies (a
// class whose pool is on some nodes only: docs/volumes.md, "Classes of
// some nodes"). The scheduler keeps WaitForFirstConsumer claims off other
// nodes; a claim pinned to one by annotation fails here.
func (p *Provisioner) hostname(class *storagev1.StorageClass) (string, controller.ProvisioningState, error) {
	node, err := p.cfg.Nodes.Get(p.cfg.Node)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", controller.ProvisioningInBackground, fmt.Errorf("node %q is not in the cache yet; will retry", p.cfg.Node)
		}
		return "", controller.ProvisioningInBackground, fmt.Errorf("read node %q: %w", p.cfg.Node, err)
	}
	if !inTopologies(node.Labels, class.AllowedTopologies) {
		return "", controller.ProvisioningFinished, fmt.Errorf("node %q is not in the allowedTopologies of StorageClass %s (%s): its volumes go only to nodes with those labels; pin the claim to one of them", node.Name, class.Name, topologiesString(class.AllowedTopologies))
	}
	hostname := node.Labels[v1.LabelHostname]
	if hostname == "" {
		return "", controller.ProvisioningFinished, fmt.Errorf("node %q has no %s label to give the volume node affinity", node.Name, v1.LabelHostname)
	}
	return hostname, controller.ProvisioningFinished, nil
}

// inTopologies reports whether a node with labels is in terms, a
// StorageClass's allowedTopologies, as the scheduler decides it: no term
// allows every node; otherwise a node must match every expression of one
// term (its label present, with one of the values), and a term without
// expressions matches no node.
func inTopologies(labels map[string]string, terms []v1.TopologySelectorTerm) bool {
	if len(terms) == 0 {
		return true
	}
	for _, term := range terms {
		if len(term.MatchLabelExpressions) > 0 && !slices.ContainsFunc(term.MatchLabelExpressions, func(r v1.TopologySelectorLabelRequirement) bool {
			v, ok := labels[r.Key]
			return !ok || !slices.Contains(r.Values, v)
		}) {
			return true
		}
	}
	return false
}

// topologiesString is terms as a user writes them: the terms joined by
// " or ", each as key in (values) joined by " and ".
func topologiesString(terms []v1.TopologySelectorTerm) string {
	var or []string
	for _, term := range terms {
		var and []string
		for _, r := range term.MatchLabelExpressions {
			and = append(and, fmt.Sprintf("%s in (%s)", r.Key, strings.Join(r.Values, ", ")))
		}
		or = append(or, strings.Join(and, " and "))
	}
	return strings.Join(or, " or ")
}

// maxVolumeSize is the largest request the manager can be asked for: its
// free-space check takes an int64 byte count.
var maxVolumeSize = *resource.NewQuantity(math.MaxInt64, resource.BinarySI)

// requestedBytes returns the exact byte count of a storage request, or an
// error when it does not fit in an int64 (Quantity.Value would wrap or clamp
// it, and the manager would skip its free-space check).
func requestedBytes(size resource.Quantity) (int64, error) {
	if size.Cmp(maxVolumeSize) > 0 {
		return 0, fmt.Errorf("the claim requests %s of storage, more than the largest volume size of %d bytes: request less", size.String(), int64(math.MaxInt64))
	}
	return size.Value(), nil
}

// claimDirectory returns the directory a claim's volume gets: the one its
// hostpathv1.AnnotationReuseDirectory names (reuse true), or the expanded pathPattern.
func claimDirectory(params Parameters, claim *v1.PersistentVolumeClaim, pvName string) (dir string, reuse bool, err error) {
	name, ok := claim.Annotations[hostpathv1.AnnotationReuseDirectory]
	if !ok {
		dir, err := params.Directory(claim.Namespace, claim.Name, pvName)
		return dir, false, err
	}
	if err := managerapi.ValidateVolumeName(name); err != nil {
		return "", true, fmt.Errorf("claim annotation %s: %w", hostpathv1.AnnotationReuseDirectory, err)
	}
	return name, true, nil
}

// checkClass rejects a class whose volumes no pod could use: the kubelet
// refuses to mount a hostPath PV that has mount options (its hostPath plugin
// supports none), and a PV takes its class's mountOptions.
func checkClass(class *storagev1.StorageClass, params Parameters) error {
	if params.Mode == hostpathv1.ModeMultihost && len(class.AllowedTopologies) > 0 {
		return fmt.Errorf("StorageClass allowedTopologies (%s) are not supported in mode %q: a multihost volume is on every node of its pool; remove them, or use mode %q",
			topologiesString(class.AllowedTopologies), hostpathv1.ModeMultihost, hostpathv1.ModeNode)
	}
	if params.VolumeType == VolumeTypeHostPath && len(class.MountOptions) > 0 {
		return fmt.Errorf("StorageClass mountOptions %q are not supported with %s %q: the kubelet mounts no hostPath volume with mount options; remove them, or use %s %q",
			class.MountOptions, ParamVolumeType, VolumeTypeHostPath, ParamVolumeType, VolumeTypeLocal)
	}
	return nil
}

// checkClaim rejects claims that the volumes of mode cannot serve.
func checkClaim(claim *v1.PersistentVolumeClaim, mode string) error {
	for _, m := range claim.Spec.AccessModes {
		switch {
		case mode == hostpathv1.ModeMultihost:
			if !slices.Contains(multihostAccessModes, m) {
				return fmt.Errorf("access mode %s is not supported; use ReadWriteMany, ReadWriteOnce, ReadWriteOncePod or ReadOnlyMany", m)
			}
		case m == v1.ReadWriteMany:
			return fmt.Errorf("access mode %s is not supported in mode %q: one node's directory cannot be shared across nodes (that is what a StorageClass of mode %q is for: every node gets its own copy of the directory); use ReadWriteOnce, ReadWriteOncePod or ReadOnlyMany", m, hostpathv1.ModeNode, hostpathv1.ModeMultihost)
		case !slices.Contains(supportedAccessModes, m):
			return fmt.Errorf("access mode %s is not supported; use ReadWriteOnce, ReadWriteOncePod or ReadOnlyMany", m)
		}
	}
	if claim.Spec.Selector != nil {
		return errors.New("claims with a selector are not supported: remove spec.selector")
	}
	if _, err := sourceClaimName(claim); err != nil {
		return err
	}
	if _, reuse := claim.Annotations[hostpathv1.AnnotationReuseDirectory]; reuse && (claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil) {
		return fmt.Errorf("a clone (spec.dataSource) gets a new directory: remove the claim annotation %s, or the data source", hostpathv1.AnnotationReuseDirectory)
	}
	if _, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]; !ok {
		return errors.New("the claim requests no storage size")
	}
	return nil
}

// pvInput is what a PV is made of.
type pvInput struct {
	name  string
	class *storagev1.StorageClass
	claim *v1.PersistentVolumeClaim
	pool  string
	dir   string
	size  resource.Quantity
	// node and hostname are those of a node-mode volume.
	node     string
	hostname string
	// local makes a local PV (VolumeTypeLocal) instead of a hostPath one.
	local bool
	// multihost says that the volume is of mode multihost; nodes hold its
	// directory and pending get it later, from the host definer.
	multihost bool
	nodes     []string
	pending   []string
}

// enforcementOf is the hostpathv1.AnnotationSizeEnforcement of a volume whose
// directories got the enforcements kinds ("" for none).
func enforcementOf(kinds ...string) string {
	if len(kinds) == 0 || slices.Contains(kinds, "") {
		return hostpathv1.EnforcementNone
	}
	kinds = slices.Clone(kinds)
	slices.Sort(kinds)
	return strings.Join(slices.Compact(kinds), ",")
}

// reclaimPolicy returns the reclaim policy of the volumes of a class.
func reclaimPolicy(class *storagev1.StorageClass) v1.PersistentVolumeReclaimPolicy {
	if class.ReclaimPolicy != nil {
		return *class.ReclaimPolicy
	}
	return v1.PersistentVolumeReclaimDelete
}

// buildPV returns the PV of a volume, but for what the managers answer
// (the host path, see setPath, and hostpathv1.AnnotationSizeEnforcement): a
// hostPath of type Directory, or a local volume when in.local; with node
// affinity to its node in node mode; a multihost volume has none, but a
// local one the nodes that run a manager (see VolumeTypeLocal). It is made
// before the directory, whose create request is made from it
// (hostpathv1.NewCreateVolumeRequest), so the owner records start with the
// PV's reclaim policy (hostpathv1.AnnotationRecordedPolicy). It carries the
// watch label (labelled). The library adds the
// claim reference, the storage class name and
// pv.kubernetes.io/provisioned-by.
func buildPV(in pvInput) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: in.name,
			// The instance of the node (the elected one for multihost)
			// removes or retains the directory before the PV goes,
			// however it is deleted (package reclaim).
			Finalizers: []string{hostpathv1.FinalizerDirectoryProtection},
			Annotations: map[string]string{
				hostpathv1.AnnotationPool:           in.pool,
				hostpathv1.AnnotationDirectory:      in.dir,
				hostpathv1.AnnotationClaimNamespace: in.claim.Namespace,
				hostpathv1.AnnotationClaimName:      in.claim.Name,
				hostpathv1.AnnotationMode:           hostpathv1.ModeNode,
			},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: in.size},
			AccessModes:                   slices.Clone(in.claim.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: reclaimPolicy(in.class),
			MountOptions:                  slices.Clone(in.class.MountOptions),
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
			PersistentVolumeSource:        volumeSource(in.local),
		},
	}
	pv.Annotations[hostpathv1.AnnotationRecordedPolicy] = hostpathv1.RecordedReclaimPolicy(pv)
	if in.multihost {
		pv.Annotations[hostpathv1.AnnotationMode] = hostpathv1.ModeMultihost
		pv.Annotations[hostpathv1.AnnotationNodes] = hostpathv1.JoinNodes(in.nodes)
		if len(in.pending) > 0 {
			pv.Annotations[hostpathv1.AnnotationPendingNodes] = hostpathv1.JoinNodes(in.pending)
		}
		if in.local {
			pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: hostpathv1.ManagerNodeSelector()}
		}
		return labelled(pv)
	}
	pv.Annotations[hostpathv1.AnnotationNode] = in.node
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{
				Key:      v1.LabelHostname,
				Operator: v1.NodeSelectorOpIn,
				Values:   []string{in.hostname},
			}},
		}},
	}}
	return labelled(pv)
}

// labelled sets the watch label hostpathv1.LabelNode on pv from its
// annotations (hostpathv1.VolumeNodeLabel): the API server sends a
// node-mode PV to its node's instance only, a multihost one to all.
func labelled(pv *v1.PersistentVolume) *v1.PersistentVolume {
	pv.Labels = map[string]string{hostpathv1.LabelNode: hostpathv1.VolumeNodeLabel(pv)}
	return pv
}

// volumeSource is the source of a PV without its path: a local volume
// (no fsType: the path is a directory, not a block device), or a hostPath
// of type Directory.
func volumeSource(local bool) v1.PersistentVolumeSource {
	if local {
		return v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{}}
	}
	return v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Type: ptr.To(v1.HostPathDirectory)}}
}

// setPath sets the host path of the directory of a PV that buildPV made,
// in its source, whichever it is.
func setPath(pv *v1.PersistentVolume, path string) {
	switch s := &pv.Spec.PersistentVolumeSource; {
	case s.Local != nil:
		s.Local.Path = path
	case s.HostPath != nil:
		s.HostPath.Path = path
	}
}

// Delete takes a Released PV's directory to its final state on every node
// that holds it, as the directory's owner, through the one deletion path
// (Config.Reclaim, package reclaim), and returns nil once every node is
// done. It leaves the PV's finalizer on: the library then deletes the PV
// (its one DELETE), and the reclaim controller removes the finalizer of
// the PV under deletion, without asking the managers again when this
// instance's Delete did moments before. While a node that holds the
// directory is not done, Delete fails and the library retries. A PV whose
// Delete succeeded here a moment ago (the library syncs it again before
// its DELETE went through) is done at once, without a manager call:
// Config.Reclaim remembers it.
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if !p.ShouldDelete(ctx, pv) {
		return &controller.IgnoredError{Reason: "another instance deletes the volume"}
	}
	return p.cfg.Reclaim(ctx, pv)
}
