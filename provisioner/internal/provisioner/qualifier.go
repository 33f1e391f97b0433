package provisioner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/util"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/responsibility"
)

// nodeChoice is the node a claim asks for and where that came from.
type nodeChoice struct {
	node   string
	source string
	// conflict describes annotations that name other nodes, or is "".
	conflict string
}

// sourceChoice is the nodeChoice.source of a node-mode clone: its
// source's node, which wins over every annotation.
const sourceChoice = "the clone's source"

// chooseNode applies the annotation precedence to a claim; the node of
// src, the source of a node-mode clone (nil: none), comes first.
func chooseNode(claim *v1.PersistentVolumeClaim, src *source) nodeChoice {
	var c nodeChoice
	if src != nil && !src.dir.Multihost {
		c.node, c.source = src.dir.Node, sourceChoice
	}
	for _, key := range hostpathv1.ClaimNodeAnnotations {
		v := claim.Annotations[key]
		switch {
		case v == "":
		case c.node == "":
			c.node, c.source = v, key
		case v != c.node:
			if c.conflict != "" {
				c.conflict += "; "
			}
			c.conflict += fmt.Sprintf("%s is %q but %s is %q: the volume goes to %q (%s wins)", c.source, c.node, key, v, c.node, c.source)
		}
	}
	return c
}

// pinned reports whether the node comes from an explicit annotation rather
// than from the scheduler.
func (c nodeChoice) pinned() bool { return c.source != storagehelpers.AnnSelectedNode }

// verdict is what one instance makes of a claim.
type verdict int

const (
	// notServed: the claim's class is missing or another provisioner's.
	notServed verdict = iota
	// elsewhere: another instance's claim, or a claim no instance serves.
	elsewhere
	// selectNode: the claim is pinned to this node by annotation but its
	// WaitForFirstConsumer class waits for selected-node, which the claim
	// sync sets.
	selectNode
	// provision: this instance provisions the claim now.
	provision
	// reschedule: the node the scheduler selected for a WaitForFirstConsumer
	// claim was deleted or runs no instance, and this instance is the one
	// elected for the claim: it gives the claim back to the scheduler.
	// Provision answers ProvisioningReschedule (for a deleted node before
	// any other check), which makes the library remove selected-node.
	reschedule
)

// decision is what this instance makes of a claim, from the informer caches
// alone. Both the Qualifier and the claim sync act on it.
type decision struct {
	verdict verdict
	class   *storagev1.StorageClass
	// multihost says that the class is of mode multihost: one elected
	// instance provisions the claim, and choice is empty.
	multihost bool
	// waitForConsumer says that the class binds WaitForFirstConsumer.
	waitForConsumer bool
	// choice is the node the claim asks for (chooseNode, once).
	choice nodeChoice
	// gone says why no instance can serve choice.node, for verdict
	// reschedule.
	gone absence
	// sourceErr says why a node-mode clone's source cannot be cloned
	// (yet): no instance provisions the claim, and the elected one
	// reports it.
	sourceErr error
}

// absence says why no instance serves a node.
type absence struct {
	// reason is ReasonNodeNotFound or ReasonNoInstance; "" when an
	// instance serves the node.
	reason string
	// controlPlane says, with ReasonNoInstance, that the node is a
	// control-plane node, where the node agents run only with
	// ControlPlaneComponent.
	controlPlane bool
}

// decide reads the claim's StorageClass and applies the node annotations. The
// error is that of the rule (the election among instances). A claim whose
// storage-provisioner annotations name another provisioner is not served,
// whatever its class says, as the library would not provision it (nor do
// the informers cache it: package cachetrim).
func (p *Provisioner) decide(ctx context.Context, claim *v1.PersistentVolumeClaim) (decision, error) {
	if responsibility.ForeignClaim(claim, p.cfg.Names) {
		return decision{verdict: notServed}, nil
	}
	class := p.class(ctx, claim)
	if class == nil {
		return decision{verdict: notServed}, nil
	}
	d := decision{
		verdict:         elsewhere,
		class:           class,
		multihost:       class.Parameters[hostpathv1.ParamMode] == hostpathv1.ModeMultihost,
		waitForConsumer: class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer,
	}
	if d.multihost {
		// One elected instance provisions a multihost claim and fans it
		// out to every node; the scheduler's selected node does not
		// matter.
		acts, err := p.acts(responsibility.Provision, claim, d)
		if acts {
			d.verdict = provision
		}
		return d, err
	}
	src, err := p.cloneSource(ctx, claim, class)
	var se *sourceError
	switch {
	case errors.As(err, &se):
		d.sourceErr = err
		return d, nil
	case err != nil:
		return d, err
	}
	d.choice = chooseNode(claim, src)
	switch {
	case d.choice.node != p.cfg.Node:
		return p.decideElsewhere(claim, d)
	case (d.waitForConsumer || src != nil) && claim.Annotations[storagehelpers.AnnSelectedNode] == "":
		// The library provisions WaitForFirstConsumer claims only once
		// selected-node is set. A clone gets it in any class: setting it
		// is the claim update that makes the library look at a clone
		// whose source was bound after it.
		d.verdict = selectNode
	default:
		d.verdict = provision
	}
	return d, nil
}

// decideElsewhere decides a claim of another node: the verdict is
// reschedule when the scheduler chose that node for a WaitForFirstConsumer
// claim and this instance speaks for the claim (responsibility.Speak: the
// node is deleted or runs no instance, and this instance is elected for
// the claim); elsewhere otherwise. A node pinned by annotation is never
// replaced: the claim sync reports it instead.
func (p *Provisioner) decideElsewhere(claim *v1.PersistentVolumeClaim, d decision) (decision, error) {
	if !d.waitForConsumer || d.choice.node == "" || d.choice.pinned() {
		return d, nil
	}
	speaks, err := p.acts(responsibility.Speak, claim, d)
	if err != nil || !speaks {
		return d, err
	}
	gone, err := p.nodeGone(d.choice.node)
	if err != nil || gone.reason == "" {
		return d, err
	}
	d.verdict, d.gone = reschedule, gone
	return d, nil
}

// nodeGone says why no instance serves node: no reason when a
// provisioner pod is on it (the peer cache says so, without a question
// to the API server); else ReasonNodeNotFound when the Node does not
// exist, ReasonNoInstance when it does (and whether it is a control-plane
// node), from Config.Nodes.
func (p *Provisioner) nodeGone(node string) (absence, error) {
	running, err := p.rule.Served(node)
	if err != nil || running {
		return absence{}, err
	}
	n, err := p.cfg.Nodes.Get(node)
	switch {
	case apierrors.IsNotFound(err):
		return absence{reason: ReasonNodeNotFound}, nil
	case err != nil:
		return absence{}, fmt.Errorf("look Node %q up: %w", node, err)
	}
	return absence{reason: ReasonNoInstance, controlPlane: isControlPlane(n)}, nil
}

// controlPlaneRole is the label and taint key of control-plane nodes
// (node-role.kubernetes.io/control-plane, as kubeadm sets them; no
// Kubernetes package this module imports defines it). The node agents
// tolerate its taint only with the kustomize component that adds them to
// control-plane nodes, so the provisioner names that component to a claim
// pinned to such a node.
const controlPlaneRole = "node-role.kubernetes.io/control-plane"

// isControlPlane reports whether node is a control-plane node: it has the
// label or a taint controlPlaneRole.
func isControlPlane(node *v1.Node) bool {
	if _, ok := node.Labels[controlPlaneRole]; ok {
		return true
	}
	return slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == controlPlaneRole })
}

// DefaultClassWait bounds how long class waits for a StorageClass that the
// claim's storage-provisioner annotation says is this provisioner's but that
// this instance's cache does not hold yet. The PV controller set that
// annotation from the class it read, so the class is on its way: a class
// made just before its claim reaches the class and claim informers in
// either order. Without the wait, such a claim was left for the library's
// next resync (15 minutes; the library requeues a claim only on an error,
// and an unserved claim is none).
const DefaultClassWait = 5 * time.Second

// classPoll is how often class looks in the cache meanwhile.
const classPoll = 20 * time.Millisecond

// classMissMemory is how long class does not wait again for a class it
// waited for in vain, so that the claims of a deleted class do not each
// hold a worker for the wait at every resync.
const classMissMemory = time.Minute

// class returns the claim's StorageClass if this provisioner serves it,
// waiting up to Config.ClassWait for one that the claim says is on its way.
func (p *Provisioner) class(ctx context.Context, claim *v1.PersistentVolumeClaim) *storagev1.StorageClass {
	name := util.GetPersistentVolumeClaimClass(claim)
	if name == "" {
		return nil
	}
	class, err := p.cfg.Classes.Get(name)
	if apierrors.IsNotFound(err) && p.namedBy(claim) && !p.missedLately(name) {
		klog.FromContext(ctx).V(2).Info("Waiting for the claim's StorageClass to reach the cache", "pvc", klog.KObj(claim), "storageClass", name)
		_ = wait.PollUntilContextTimeout(ctx, classPoll, cmp.Or(p.cfg.ClassWait, DefaultClassWait), false, func(context.Context) (bool, error) {
			class, err = p.cfg.Classes.Get(name)
			return err == nil, nil
		})
		if err != nil {
			p.classMisses.Store(name, p.clock().Now())
		}
	}
	if err != nil || !p.cfg.Names.Has(class.Provisioner) {
		return nil
	}
	return class
}

// missedLately reports whether class waited for the class name in vain
// within classMissMemory.
func (p *Provisioner) missedLately(name string) bool {
	at, ok := p.classMisses.Load(name)
	return ok && p.clock().Since(at.(time.Time)) < classMissMemory
}

// namedBy reports whether the claim's storage-provisioner annotation (or
// its beta twin) names this provisioner.
func (p *Provisioner) namedBy(claim *v1.PersistentVolumeClaim) bool {
	return p.cfg.Names.Has(claim.Annotations[storagehelpers.AnnStorageProvisioner]) ||
		p.cfg.Names.Has(claim.Annotations[storagehelpers.AnnBetaStorageProvisioner])
}

// acts reports whether this instance does v for claim under the decision
// d: its mode and the node it asks for.
func (p *Provisioner) acts(v responsibility.Verb, claim *v1.PersistentVolumeClaim, d decision) (bool, error) {
	a, err := p.rule.Acts(v, responsibility.Object{Key: string(claim.UID), Multihost: d.multihost, Node: d.choice.node})
	if err != nil {
		return false, fmt.Errorf("decide whether to %s claim %s: %w", v, klog.KObj(claim), err)
	}
	return a.Acts, nil
}

// ShouldProvision is the Qualifier: it says yes only on the instance that
// provisions the claim, so that the library emits no event, writes nothing and
// counts no failure for it on the others. It reads the informer caches and
// writes nothing itself: the claim sync reports the problems of claims and
// sets selected-node.
func (p *Provisioner) ShouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	d, err := p.decide(ctx, claim)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to decide whether to provision the claim", "pvc", klog.KObj(claim))
		return false
	}
	return d.verdict == provision || d.verdict == reschedule
}

// ShouldDelete is the DeletionGuard: it says yes on the instance that
// deletes the PV (responsibility.Delete): its node's instance; a
// multihost PV's, the instance elected for its UID. A PV whose node is
// gone is nobody's here: the reclaim controller's node-gone handling
// deletes it after its grace period.
func (p *Provisioner) ShouldDelete(ctx context.Context, pv *v1.PersistentVolume) bool {
	a, err := p.rule.Acts(responsibility.Delete, responsibility.Object{
		Key:       string(pv.UID),
		Multihost: pv.Annotations[hostpathv1.AnnotationMode] == hostpathv1.ModeMultihost,
		Node:      pv.Annotations[hostpathv1.AnnotationNode],
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to elect the instance that deletes the volume", "pv", klog.KObj(pv))
		return false
	}
	return a.Acts
}
