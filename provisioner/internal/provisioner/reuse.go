package provisioner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// reuseDirectory hands the existing directory dir of pool to the volume pv
// (its name, reclaim policy and claim namespace), for a claim with
// hostpathv1.AnnotationReuseDirectory. It refuses, with the state Finished and a
// message for the claim's event, and without changing anything on disk, a
// directory that does not exist or may not be reused from the claim's
// namespace (one message for both: notReusable), that is not marked
// retained, that another PV names, or whose owner PV still exists;
// otherwise it sets the owner record to pvName (compare-and-swap on the old
// owner), keeping the claim's namespace in it. A nil error means the
// directory is pvName's.
func (p *Provisioner) reuseDirectory(ctx context.Context, mgr VolumeManager, pool, dir string, pv *v1.PersistentVolume) (controller.ProvisioningState, error) {
	where, pvName, namespace := p.where(pool, dir), pv.Name, hostpathv1.ClaimNamespaceOf(pv)
	vol, err := mgr.GetVolume(ctx, pool, dir)
	if managerapi.Classify(err) == managerapi.AnswerVolumeMissing {
		// The same answer as for a directory of another namespace
		// (checkReusable), so that a claim cannot tell them apart.
		klog.FromContext(ctx).V(2).Info("The directory to reuse does not exist", "pool", pool, "directory", dir, "err", err)
		return controller.ProvisioningFinished, notReusable(where, namespace)
	}
	if err != nil {
		return provisioningState(fmt.Errorf("read %s to reuse it: %w", where, err), false)
	}
	if vol.Owner == pvName {
		// Handed over by an earlier attempt that failed later on.
		return controller.ProvisioningFinished, nil
	}
	if state, err := p.checkReusable(ctx, vol, pool, pvName, namespace); err != nil {
		return state, err
	}
	_, err = mgr.SetOwner(ctx, pool, dir, managerapi.SetOwnerRequest{
		Owner: pvName, Previous: vol.Owner, ReclaimPolicy: hostpathv1.RecordedReclaimPolicy(pv), ClaimNamespace: namespace})
	if owner, conflict := managerapi.OwnerOf(err); conflict && owner == pvName {
		err = nil
	}
	if err != nil {
		return provisioningState(p.createError(err, pool, dir), false)
	}
	klog.FromContext(ctx).Info("Reused a volume directory", "node", p.cfg.Node, "pool", pool, "directory", dir, "previousOwner", vol.Owner, "claimNamespace", namespace)
	return controller.ProvisioningFinished, nil
}

// checkReusable refuses a directory that may not be reused from namespace
// (checkNamespace), that any PV other than pvName names in its
// annotations, whose owner record is not marked retained, or whose owner
// PV still exists (in the cache or, to be sure, on the API server). The namespace
// comes first, so that a claim of another namespace learns nothing about
// the directory, not even that it exists.
//
// Only a retained record is reused: that of a volume deleted with reclaim
// policy Retain, or one an administrator handed over (the manager's owner
// call with "retained": true, docs/operations.md). A record that is not
// retained is a live volume's, or that of a directory the manager has just
// made for another claim whose PV is not saved yet: its owner PV does not
// exist yet, and the directory must not be taken before it is.
func (p *Provisioner) checkReusable(ctx context.Context, vol *managerapi.Volume, pool, pvName, namespace string) (controller.ProvisioningState, error) {
	where := p.where(pool, vol.Name)
	if !checkNamespace(vol.ClaimNamespace, namespace) {
		return controller.ProvisioningFinished, notReusable(where, namespace)
	}
	names, err := p.volumesNaming(ctx, pool, vol.Name)
	if err != nil {
		return controller.ProvisioningInBackground, fmt.Errorf("find the volumes that use %s: %w; will retry", where, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == pvName })
	if len(names) > 0 {
		return controller.ProvisioningFinished, fmt.Errorf("cannot reuse %s: the PersistentVolumes %s use it; only the directory of a deleted volume can be reused (delete the released volume first)", where, quoteAll(names))
	}
	if !vol.Retained {
		return controller.ProvisioningFinished, fmt.Errorf("cannot reuse %s: its owner record, of %s, is not marked retained: the directory is in use, or is being made for another claim; "+
			"only the directory of a volume deleted with reclaim policy Retain, or one an administrator handed over as retained, can be reused", where, ownerText(vol.Owner))
	}
	if vol.Owner == "" {
		return controller.ProvisioningFinished, nil
	}
	exists, err := p.volumeExists(ctx, vol.Owner)
	if err != nil {
		return controller.ProvisioningInBackground, fmt.Errorf("check whether PersistentVolume %q, the owner of %s, still exists: %w; will retry", vol.Owner, where, err)
	}
	if exists {
		return controller.ProvisioningFinished, fmt.Errorf("cannot reuse %s: it belongs to PersistentVolume %q, which still exists; only the directory of a deleted volume can be reused", where, vol.Owner)
	}
	return controller.ProvisioningFinished, nil
}

// checkNamespace reports whether a directory whose owner record names the
// namespace recorded may be reused from namespace: only when they are the
// same. The recorded namespace is the claim namespace of the volume the
// directory was made for, or the one an administrator handed it over to
// with the manager's owner call. A record without a namespace (written by
// an older version, or a directory without an owner record) is refused
// too, until it is handed over: the data may be another namespace's.
func checkNamespace(recorded, namespace string) bool {
	return recorded != "" && recorded == namespace
}

// notReusable is the refusal of a directory where that does not exist or
// may not be reused from namespace (checkNamespace): one message for all,
// so that a claim learns nothing of the directories of other namespaces,
// not even whether they exist (directory names are no secret: they show
// in metrics).
func notReusable(where, namespace string) error {
	return fmt.Errorf("cannot reuse %s from namespace %q: it does not exist, or its owner record does not name this namespace "+
		"(a directory is reused only from the namespace it was made or handed over for; records of older versions, and directories without one, name none): "+
		"name the %s of a retained volume of this namespace, or remove the annotation %s; "+
		"an administrator can hand a directory over to namespace %q with the manager's owner call (claimNamespace; see \"Reusing a retained directory\" in docs/volumes.md)",
		where, namespace, hostpathv1.AnnotationDirectory, hostpathv1.AnnotationReuseDirectory, namespace)
}

// volumeExists reports whether the PV name exists: in the informer cache,
// else on the API server (the cache may lag behind a new volume).
func (p *Provisioner) volumeExists(ctx context.Context, name string) (bool, error) {
	if p.cfg.Volumes != nil {
		_, err := p.cfg.Volumes.Get(name)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	_, err := p.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("get PersistentVolume %q: %w", name, err)
}

// volumesNaming returns the sorted names of the PVs whose annotations
// name the directory dir of pool on this node (knownVolumes).
func (p *Provisioner) volumesNaming(ctx context.Context, pool, dir string) ([]string, error) {
	pvs, err := p.knownVolumes(ctx)
	if err != nil {
		return nil, err
	}
	want := dirKey{node: p.cfg.Node, pool: pool, dir: dir}
	var names []string
	for _, pv := range pvs {
		if k, ok := keyOf(pv); ok && k == want {
			names = append(names, pv.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// knownVolumes returns the PVs that may name a directory of this node:
// those of the informer cache, which holds the PVs the watch label gives
// this instance (hostpathv1.WatchSelector), and those without the label,
// asked of the API server (from its watch cache, page by page), but for
// those cached (a PV labelled since): PVs made by hand, or by another
// provisioner, that point into a pool carry no label, and still protect
// the directory they name.
func (p *Provisioner) knownVolumes(ctx context.Context) ([]*v1.PersistentVolume, error) {
	if p.cfg.Volumes == nil {
		return nil, errors.New("the provisioner has no PersistentVolume cache")
	}
	pvs, err := p.cfg.Volumes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	cached := make(map[string]bool, len(pvs))
	for _, pv := range pvs {
		cached[pv.Name] = true
	}
	list := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
		return p.cfg.Client.CoreV1().PersistentVolumes().List(ctx, opts)
	}))
	err = list.EachListItemWithAlloc(ctx, metav1.ListOptions{LabelSelector: hostpathv1.UnlabelledSelector().String(), ResourceVersion: "0"},
		func(obj runtime.Object) error {
			if pv, ok := obj.(*v1.PersistentVolume); ok && !cached[pv.Name] {
				pvs = append(pvs, pv)
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("list the PersistentVolumes without the label %s: %w", hostpathv1.LabelNode, err)
	}
	return pvs, nil
}

// dirKey is a directory of a pool on a node.
type dirKey struct{ node, pool, dir string }

// keyOf returns the directory a PV's annotations name.
func keyOf(pv *v1.PersistentVolume) (dirKey, bool) {
	k := dirKey{node: pv.Annotations[hostpathv1.AnnotationNode], pool: pv.Annotations[hostpathv1.AnnotationPool], dir: pv.Annotations[hostpathv1.AnnotationDirectory]}
	return k, k.node != "" && k.pool != "" && k.dir != ""
}

// createError words the error of a create or owner change of the directory
// dir: a 409 OwnerConflict says whose the directory is and how to get a
// directory of one's own; other errors only say what failed.
func (p *Provisioner) createError(err error, pool, dir string) error {
	owner, conflict := managerapi.OwnerOf(err)
	if !conflict {
		return fmt.Errorf("create %s: %w", p.where(pool, dir), err)
	}
	return fmt.Errorf("%s belongs to %s; two claims cannot share a directory: use a pathPattern with ${%s}, or reuse a retained directory with the annotation %s (%w)",
		p.where(pool, dir), p.describeOwner(owner), VarVolumeName, hostpathv1.AnnotationReuseDirectory, err)
}

// describeOwner names the owner of a directory and, from the cache, its claim.
func (p *Provisioner) describeOwner(owner string) string {
	text := ownerText(owner)
	if owner == "" || p.cfg.Volumes == nil {
		return text
	}
	pv, err := p.cfg.Volumes.Get(owner)
	switch {
	case apierrors.IsNotFound(err):
		return text + " (deleted: the directory was retained)"
	case err != nil:
		return text
	}
	ns, name := pv.Annotations[hostpathv1.AnnotationClaimNamespace], pv.Annotations[hostpathv1.AnnotationClaimName]
	if name == "" && pv.Spec.ClaimRef != nil {
		ns, name = pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name
	}
	if name == "" {
		return text
	}
	return fmt.Sprintf("%s (claim %s/%s)", text, ns, name)
}

// ownerText names the owner a manager reports.
func ownerText(owner string) string {
	if owner == "" {
		return "no PersistentVolume (it has no owner record: made before owner records existed, or by hand)"
	}
	return fmt.Sprintf("PersistentVolume %q", owner)
}

// where names a directory of a pool on this node for messages.
func (p *Provisioner) where(pool, dir string) string {
	return fmt.Sprintf("directory %q in pool %q on node %q", dir, pool, p.cfg.Node)
}

// quoteAll quotes names and joins them with commas.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
