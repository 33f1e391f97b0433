package disk

import (
	"context"
	"fmt"
	"strings"

	hostpathv1 "hostpath.dev/api/hostpath/v1"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"hostpath.dev/api/managerapi"
)

// Owners is what the Store asks the API server before a caller bound to
// another node (a remote caller, see checkRemote) changes a multihost
// copy: kube.Owners implements it, tests give a fake. Both return nil,
// nil for an object that does not exist; another error when they cannot
// tell.
type Owners interface {
	// PersistentVolume returns the PersistentVolume name. Unless fresh,
	// a PV found Bound (and not being deleted) a few seconds ago may be
	// answered from memory; any other answer must be read fresh.
	PersistentVolume(ctx context.Context, name string, fresh bool) (*corev1.PersistentVolume, error)
	// Claim returns the PersistentVolumeClaim name of namespace, read
	// fresh.
	Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// StorageClass returns the StorageClass name, read fresh.
	StorageClass(ctx context.Context, name string) (*storagev1.StorageClass, error)
}

// claimVolumePrefix is what the provisioner library names a claim's PV:
// "pvc-" and the claim's UID.
const claimVolumePrefix = "pvc-"

// checkRemoteRemoval refuses a remote caller's removal of the multihost
// copy name (its owner record rec, naming the owner the caller named)
// unless the owner PV lets it go: it no longer exists (and the record
// neither says retained nor reclaim policy Retain), or it names this
// pool and directory, has reclaim policy Delete and is being deleted,
// Released or Failed. Anything else is Conflict naming the PV and its
// phase: a node removes another node's copy of a volume only once the
// volume is done with, as the API server says (a Bound PV may be answered
// from a few seconds' memory; an answer that allows is always fresh).
// This node's callers and admins (remote "") are not checked.
func (tx *volumeTx) checkRemoteRemoval(ctx context.Context) error {
	s, remote, p, name, rec := tx.s, tx.remote, tx.p, tx.name, tx.rec
	if remote == "" {
		return nil
	}
	refuse := func(why string, args ...any) error {
		return conflictf("a caller bound to node %q cannot delete volume %q in pool %q on node %q: %s; another node may remove a multihost copy only once its PersistentVolume is gone, being deleted, Released or Failed, with reclaim policy Delete",
			remote, name, p.name, s.nodeName, fmt.Sprintf(why, args...))
	}
	pv, err := tx.ownerVolume(ctx, "delete", rec.Owner, false)
	if err != nil {
		return err
	}
	if pv == nil {
		if rec.Retained || rec.ReclaimPolicy == managerapi.ReclaimRetain {
			return refuse("its PersistentVolume %q no longer exists, but the directory was retained (its owner record says reclaim policy %q, retained %v), so only node %q's own callers or an admin may remove it",
				rec.Owner, rec.ReclaimPolicy, rec.Retained, s.nodeName)
		}
		return nil
	}
	if err := checkNames(pv, p, name); err != "" {
		return refuse("%s", err)
	}
	done := pv.DeletionTimestamp != nil || pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed
	if !done || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return refuse("its PersistentVolume %q is %s", pv.Name, describeVolume(pv))
	}
	return nil
}

// checkRemoteOwner refuses a remote caller's SetOwner that would rewrite
// the owner record rec of name as next, beyond what fan-outs and backfill
// need: another node adopts a directory without a record (in multihost
// mode; checkRemote and SetOwner check that) or updates the record of the
// same owner, never hands a directory to another owner nor changes its
// claim namespace (Forbidden). A change that lets the directory be
// removed later (the reclaim policy to Delete, or the retained mark
// cleared) needs the owner PV, read fresh, to name this pool and
// directory, and to have reclaim policy Delete, or to be Bound and not
// being deleted, respectively (else Conflict naming the PV and its
// phase). This node's callers and admins (remote "") are not checked.
func (tx *volumeTx) checkRemoteOwner(ctx context.Context, next record) error {
	s, remote, p, name, rec := tx.s, tx.remote, tx.p, tx.name, tx.rec
	if remote == "" || rec == nil {
		return nil
	}
	const what = "change the owner record of"
	switch {
	case rec.Owner != next.Owner:
		return forbiddenf("a caller bound to node %q cannot hand volume %q in pool %q on node %q over from PersistentVolume %q to %q: another node may only adopt a directory without an owner record, or update the record of the same owner; only node %q's own callers (or an admin) re-own a directory",
			remote, name, p.name, s.nodeName, rec.Owner, next.Owner, s.nodeName)
	case rec.ClaimNamespace != next.ClaimNamespace:
		return forbiddenf("a caller bound to node %q cannot change the claim namespace of volume %q in pool %q on node %q from %q to %q: only node %q's own callers (or an admin) hand a directory over to another namespace",
			remote, name, p.name, s.nodeName, rec.ClaimNamespace, next.ClaimNamespace, s.nodeName)
	}
	toDelete := next.ReclaimPolicy == managerapi.ReclaimDelete && rec.ReclaimPolicy != managerapi.ReclaimDelete
	unretain := rec.Retained && !next.Retained
	if !toDelete && !unretain {
		return nil
	}
	pv, err := tx.ownerVolume(ctx, what, rec.Owner, true)
	if err != nil {
		return err
	}
	refuse := func(why string, args ...any) error {
		return conflictf("a caller bound to node %q cannot %s volume %q in pool %q on node %q to let it be removed (reclaim policy %q, retained %v): %s",
			remote, what, name, p.name, s.nodeName, next.ReclaimPolicy, next.Retained, fmt.Sprintf(why, args...))
	}
	if pv == nil {
		return refuse("its PersistentVolume %q no longer exists", rec.Owner)
	}
	if err := checkNames(pv, p, name); err != "" {
		return refuse("%s", err)
	}
	if toDelete && pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return refuse("its PersistentVolume %q is %s, and only a PersistentVolume's own reclaim policy Delete is recorded so", pv.Name, describeVolume(pv))
	}
	if unretain && (pv.Status.Phase != corev1.VolumeBound || pv.DeletionTimestamp != nil) {
		return refuse("its PersistentVolume %q is %s, and only the record of a Bound PersistentVolume loses its retained mark", pv.Name, describeVolume(pv))
	}
	return nil
}

// forClaim is whom a remote caller's create, clone or adoption of a
// volume is for: the owner PV and the claim the request names.
type forClaim struct {
	owner, namespace, name string
}

// claimOfCreate is whom a create (or a clone) req is for.
func claimOfCreate(req managerapi.CreateVolumeRequest) forClaim {
	return forClaim{owner: req.Owner, namespace: req.ClaimNamespace, name: req.ClaimName}
}

// checkRemoteCreate refuses a remote caller's create (what: "create",
// "clone into") of a volume in node mode (Forbidden) and one for a claim
// it does not name (BadRequest, see requireClaim): the cheap checks, made
// before anything is read. Then the API server is asked about the claim
// (checkRemoteClaim): by a create before it takes the volume's lock, by a
// clone when a copy has to start. This node's callers and admins (remote
// "") are not checked.
func (v volumeRef) checkRemoteCreate(what string, req managerapi.CreateVolumeRequest) error {
	if v.remote == "" {
		return nil
	}
	if !req.Multihost {
		return forbiddenf("a caller bound to node %q may create on node %q only multihost volumes (\"multihost\": true): volume %q in pool %q is asked for in node mode, which only node %q's own callers may create",
			v.remote, v.s.nodeName, v.name, v.p.name, v.s.nodeName)
	}
	return v.requireClaim(what, claimOfCreate(req))
}

// requireClaim refuses a remote caller's call what ("create", "clone
// into", "adopt") of the volume name for c unless c names the claim, by
// namespace and name (BadRequest): the cheap half of checkRemoteClaim,
// which a call makes before it reads anything. This node's callers and
// admins (remote "") are not checked.
func (v volumeRef) requireClaim(what string, c forClaim) error {
	if v.remote == "" || (c.name != "" && c.namespace != "") {
		return nil
	}
	return badRequestf("a caller bound to node %q may %s volume %q in pool %q on node %q only for a claim it names: claimNamespace and claimName are required (got %q and %q)",
		v.remote, what, v.name, v.p.name, v.s.nodeName, c.namespace, c.name)
}

// checkRemoteClaim refuses a remote caller's call what ("create", "clone
// into", "adopt") of the volume name for c unless c names, by namespace
// and name (both required: BadRequest, see requireClaim), a multihost
// claim that exists, is not being deleted and is the owner's: the owner
// is "pvc-<the claim's UID>", as the provisioner library names PVs, or a
// PV whose claimRef is that claim; and the claim's StorageClass has
// parameter mode multihost. Anything else is Conflict: another node makes
// or adopts a directory only for a multihost claim that exists, so that
// it cannot plant owner records for volumes to come. This node's callers
// and admins (remote "") are not checked.
func (v volumeRef) checkRemoteClaim(ctx context.Context, what string, c forClaim) error {
	s, remote, p, name := v.s, v.remote, v.p, v.name
	if remote == "" {
		return nil
	}
	if err := v.requireClaim(what, c); err != nil {
		return err
	}
	if s.owners == nil {
		return forbiddenf("a caller bound to node %q cannot %s volume %q in pool %q on node %q: this manager has no API client to check claim %s/%s",
			remote, what, name, p.name, s.nodeName, c.namespace, c.name)
	}
	claim, err := s.owners.Claim(ctx, c.namespace, c.name)
	if err != nil {
		return fmt.Errorf("check the claim of volume %q in pool %q for a caller bound to node %q: %w", name, p.name, remote, err)
	}
	refuse := func(why string, args ...any) error {
		return conflictf("a caller bound to node %q cannot %s volume %q in pool %q on node %q for PersistentVolume %q: %s; another node creates, clones or adopts a multihost copy only for a claim that exists and is the PersistentVolume's",
			remote, what, name, p.name, s.nodeName, c.owner, fmt.Sprintf(why, args...))
	}
	switch {
	case claim == nil:
		return refuse("claim %s/%s does not exist", c.namespace, c.name)
	case claim.DeletionTimestamp != nil:
		return refuse("claim %s/%s is being deleted", c.namespace, c.name)
	}
	if c.owner != claimVolumePrefix+string(claim.UID) {
		pv, err := s.owners.PersistentVolume(ctx, c.owner, false)
		if err != nil {
			return fmt.Errorf("check the owner of volume %q in pool %q for a caller bound to node %q: %w", name, p.name, remote, err)
		}
		if pv == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != claim.Namespace || pv.Spec.ClaimRef.Name != claim.Name ||
			(pv.Spec.ClaimRef.UID != "" && pv.Spec.ClaimRef.UID != claim.UID) {
			return refuse("claim %s/%s (UID %s) is not the PersistentVolume's: its PersistentVolume would be %q, and PersistentVolume %q %s",
				c.namespace, c.name, claim.UID, claimVolumePrefix+string(claim.UID), c.owner, describeClaimRef(pv))
		}
	}
	className := ""
	if claim.Spec.StorageClassName != nil {
		className = *claim.Spec.StorageClassName
	}
	if className == "" {
		return refuse("claim %s/%s names no StorageClass, so it is no multihost claim", c.namespace, c.name)
	}
	class, err := s.owners.StorageClass(ctx, className)
	if err != nil {
		return fmt.Errorf("check the class of claim %s/%s for a caller bound to node %q: %w", c.namespace, c.name, remote, err)
	}
	switch {
	case class == nil:
		return refuse("StorageClass %q of claim %s/%s does not exist", className, c.namespace, c.name)
	case class.Parameters[hostpathv1.ParamMode] != hostpathv1.ModeMultihost:
		return refuse("claim %s/%s is of StorageClass %q, whose parameter %s is %q, not %q: only the claim's own node makes its directory",
			c.namespace, c.name, className, hostpathv1.ParamMode, class.Parameters[hostpathv1.ParamMode], hostpathv1.ModeMultihost)
	}
	return nil
}

// checkRemoteGrowth refuses a remote caller's growth of the multihost
// copy name (its owner record rec) to sizeBytes unless the owner PV, read
// fresh, exists, names this pool and directory, and allows the size: its
// spec capacity is at least sizeBytes, or, while the PV is being expanded
// (the resizer grows every copy before the PV's capacity), the claim its
// claimRef names is bound to it and requests at least sizeBytes. Anything
// else is Conflict naming the PV: another node grows a copy only as far
// as the API server says the volume goes, so that it cannot take a
// node's pool space for a size nobody asked for. This node's callers and
// admins (remote "") are not checked, and neither is a call that does not
// grow the volume.
func (tx *volumeTx) checkRemoteGrowth(ctx context.Context, sizeBytes int64) error {
	s, remote, p, name, rec := tx.s, tx.remote, tx.p, tx.name, tx.rec
	if remote == "" || sizeBytes <= rec.SizeBytes {
		return nil
	}
	refuse := func(why string, args ...any) error {
		return conflictf("a caller bound to node %q cannot grow volume %q in pool %q on node %q from %s to %s: %s; another node grows a multihost copy only up to its PersistentVolume's capacity, or the request of the PersistentVolume's claim while it is expanded",
			remote, name, p.name, s.nodeName, formatBytes(rec.SizeBytes), formatBytes(sizeBytes), fmt.Sprintf(why, args...))
	}
	// Fresh: a Bound PV allows, and a remembered one may have a
	// capacity or claim of a few seconds ago.
	pv, err := tx.ownerVolume(ctx, "grow", rec.Owner, true)
	if err != nil {
		return err
	}
	if pv == nil {
		return refuse("its PersistentVolume %q does not exist", rec.Owner)
	}
	if err := checkNames(pv, p, name); err != "" {
		return refuse("%s", err)
	}
	capacity, ok := pv.Spec.Capacity[corev1.ResourceStorage]
	if ok && capacity.CmpInt64(sizeBytes) >= 0 {
		return nil
	}
	have := "no capacity"
	if ok {
		have = "capacity " + capacity.String()
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace == "" || ref.Name == "" {
		return refuse("its PersistentVolume %q has %s and is bound to no claim", pv.Name, have)
	}
	claim, err := s.owners.Claim(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return fmt.Errorf("check claim %s/%s of PersistentVolume %q before a caller bound to node %q may grow volume %q in pool %q: %w",
			ref.Namespace, ref.Name, pv.Name, remote, name, p.name, err)
	}
	switch {
	case claim == nil:
		return refuse("its PersistentVolume %q has %s, and its claim %s/%s does not exist", pv.Name, have, ref.Namespace, ref.Name)
	case (ref.UID != "" && claim.UID != ref.UID) || claim.Spec.VolumeName != pv.Name:
		return refuse("its PersistentVolume %q has %s, and claim %s/%s (UID %s, volume %q) is not bound to it", pv.Name, have, ref.Namespace, ref.Name, claim.UID, claim.Spec.VolumeName)
	}
	request, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || request.CmpInt64(sizeBytes) < 0 {
		return refuse("its PersistentVolume %q has %s, and its claim %s/%s requests %s", pv.Name, have, ref.Namespace, ref.Name, describeRequest(request, ok))
	}
	return nil
}

// describeRequest says what a claim's storage request is, for a refusal.
func describeRequest(q resource.Quantity, ok bool) string {
	if !ok {
		return "no storage"
	}
	return q.String()
}

// ownerVolume asks the API server for the owner PV of the volume name of
// p before a remote caller's call what: Forbidden when the Store has no
// Owners (it cannot tell), an error when the API server cannot be asked.
func (v volumeRef) ownerVolume(ctx context.Context, what, owner string, fresh bool) (*corev1.PersistentVolume, error) {
	s, remote, p, name := v.s, v.remote, v.p, v.name
	if s.owners == nil {
		return nil, forbiddenf("a caller bound to node %q cannot %s volume %q in pool %q on node %q: this manager has no API client to check its PersistentVolume %q",
			remote, what, name, p.name, s.nodeName, owner)
	}
	pv, err := s.owners.PersistentVolume(ctx, owner, fresh)
	if err != nil {
		return nil, fmt.Errorf("check PersistentVolume %q, the owner of volume %q in pool %q, before a caller bound to node %q may %s it: %w", owner, name, p.name, remote, what, err)
	}
	return pv, nil
}

// checkNames says how pv's annotations name another directory than the
// volume name of p; "" when they name it.
func checkNames(pv *corev1.PersistentVolume, p *pool, name string) string {
	pool, dir := pv.Annotations[hostpathv1.AnnotationPool], pv.Annotations[hostpathv1.AnnotationDirectory]
	if pool == p.name && dir == name {
		return ""
	}
	return fmt.Sprintf("its PersistentVolume %q names directory %q of pool %q (annotations %s and %s), not this one", pv.Name, dir, pool, hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory)
}

// describeVolume says in what state pv is: its phase, whether it is being
// deleted, and its reclaim policy.
func describeVolume(pv *corev1.PersistentVolume) string {
	phase := string(pv.Status.Phase)
	if phase == "" {
		phase = "without a phase"
	}
	var b strings.Builder
	b.WriteString(phase)
	if pv.DeletionTimestamp != nil {
		b.WriteString(" and being deleted")
	}
	fmt.Fprintf(&b, " (reclaim policy %s)", pv.Spec.PersistentVolumeReclaimPolicy)
	return b.String()
}

// describeClaimRef says whose pv is, for a refusal: that it does not
// exist, or its claimRef.
func describeClaimRef(pv *corev1.PersistentVolume) string {
	switch {
	case pv == nil:
		return "does not exist"
	case pv.Spec.ClaimRef == nil:
		return "is bound to no claim"
	}
	return fmt.Sprintf("is bound to claim %s/%s (UID %s)", pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name, pv.Spec.ClaimRef.UID)
}
