package provisioner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/runtime/worker"
	"hostpath.dev/provisioner/internal/responsibility"
)

// ClaimSync is the part of an instance that writes for claims, apart from
// the library: it sets selected-node on the claims pinned to this node whose
// WaitForFirstConsumer class waits for it, and reports the problems of
// claims as events: NodeAnnotationConflict from the acting instance, and
// NodeNotSpecified, NodeNotFound and NoProvisionerOnNode from the one
// instance elected for a claim that no instance serves
// (responsibility.Speak). Each instance reports
// a given problem of a claim once. It acts on the same decision as the
// Qualifier (Provisioner.decide), in the shape of Kubernetes'
// sample-controller: the claim informer queues claim keys, workers sync one
// claim at a time from the lister, failures are retried with backoff.
type ClaimSync struct {
	prov     *Provisioner
	claims   corelisters.PersistentVolumeClaimLister
	synced   cache.InformerSynced
	recorder record.EventRecorder
	queue    *worker.Queue[string]
	// watchErr is the failure to register the event handlers, returned by
	// Run.
	watchErr error

	// clones finds the clones of a claim (cloneSourceIndex).
	clones cache.Indexer

	// reported remembers the events already emitted per claim, so that
	// repeated syncs of an unchanged claim add nothing.
	mu       sync.Mutex
	reported map[types.UID]map[string]bool
}

// NewClaimSync returns the claim sync of p's instance, emitting its events
// through recorder, and registers its event handlers with claims; start the
// informers after it.
func NewClaimSync(p *Provisioner, claims coreinformers.PersistentVolumeClaimInformer, recorder record.EventRecorder) *ClaimSync {
	s := &ClaimSync{
		prov:     p,
		claims:   claims.Lister(),
		synced:   claims.Informer().HasSynced,
		recorder: recorder,
		reported: map[types.UID]map[string]bool{},
	}
	s.queue = worker.NewQueue("claims", s.sync)
	s.clones = claims.Informer().GetIndexer()
	if err := claims.Informer().AddIndexers(cache.Indexers{cloneSourceIndex: cloneSourceKeys}); err != nil {
		s.watchErr = fmt.Errorf("index claims by clone source: %w", err)
		return s
	}
	_, s.watchErr = claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj any) { s.enqueue(obj) },
		DeleteFunc: s.claimDeleted,
	})
	return s
}

// Run waits for the claim cache, then syncs claims with workers goroutines
// until ctx is done.
func (s *ClaimSync) Run(ctx context.Context, workers int) error {
	if s.watchErr != nil {
		s.queue.ShutDown()
		return fmt.Errorf("watch claims: %w", s.watchErr)
	}
	return s.queue.Run(ctx, workers, s.synced)
}

// enqueue queues the key of a claim.
func (s *ClaimSync) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		s.queue.Add(key)
	}
}

// claimDeleted forgets the events reported for a deleted claim.
func (s *ClaimSync) claimDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if claim, ok := obj.(*v1.PersistentVolumeClaim); ok {
		s.mu.Lock()
		delete(s.reported, claim.UID)
		s.mu.Unlock()
	}
}

// sync reads one claim from the lister and carries out what this instance
// has to do for it: report its problem, set its selected-node.
func (s *ClaimSync) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // never a key of ours: nothing to retry
	}
	claim, err := s.claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get claim %s from the cache: %w", key, err)
	}
	if claim.Spec.VolumeName != "" {
		// Bound: the library asks the Qualifier no more either. Its
		// clones that wait for it may go on.
		return s.enqueueClones(claim)
	}
	d, err := s.prov.decide(ctx, claim)
	if err != nil {
		return err
	}
	e, err := s.problem(claim, d)
	if err != nil {
		return err
	}
	if e != nil {
		s.recordOnce(claim, *e)
	}
	if d.verdict != selectNode {
		return nil
	}
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "pvc", klog.KObj(claim)))
	return s.selectNode(ctx, claim, d.choice)
}

// cloneSourceIndex indexes claims by the namespace/name of the claim
// their data source names (cloneSourceKeys).
const cloneSourceIndex = "hostpath.dev/clone-source"

// cloneSourceKeys is the index function of cloneSourceIndex: an unbound
// claim whose data source is a claim of its namespace has that claim's key.
func cloneSourceKeys(obj any) ([]string, error) {
	claim, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok || claim.Spec.VolumeName != "" {
		return nil, nil
	}
	name, err := sourceClaimName(claim)
	if name == "" || err != nil {
		return nil, nil
	}
	return []string{claim.Namespace + "/" + name}, nil
}

// enqueueClones queues the unbound clones of claim.
func (s *ClaimSync) enqueueClones(claim *v1.PersistentVolumeClaim) error {
	clones, err := s.clones.ByIndex(cloneSourceIndex, claim.Namespace+"/"+claim.Name)
	if err != nil {
		return fmt.Errorf("find the clones of claim %s: %w", klog.KObj(claim), err)
	}
	for _, c := range clones {
		s.enqueue(c)
	}
	return nil
}

// event is an event on a claim.
type event struct {
	eventType, reason, message string
}

// problem returns the Warning this instance reports for a claim under the
// decision d, or nil: a conflict of node annotations on the acting
// instance; a claim that names no node in an Immediate class, a node that
// does not exist or one that runs no instance on the elected instance.
func (s *ClaimSync) problem(claim *v1.PersistentVolumeClaim, d decision) (*event, error) {
	var se *sourceError
	switch {
	case errors.As(d.sourceErr, &se):
		speaks, err := s.prov.acts(responsibility.Speak, claim, d)
		if err != nil || !speaks {
			return nil, err
		}
		if se.pending {
			return &event{v1.EventTypeNormal, ReasonCloneSourcePending, se.msg}, nil
		}
		return &event{v1.EventTypeWarning, ReasonCloneSourceInvalid, se.msg}, nil
	case d.verdict == provision || d.verdict == selectNode:
		if d.choice.conflict == "" {
			return nil, nil
		}
		return &event{v1.EventTypeWarning, ReasonNodeConflict, "Node annotations disagree: " + d.choice.conflict}, nil
	case d.verdict == reschedule:
		return &event{v1.EventTypeWarning, ReasonRescheduling, rescheduleMessage(d)}, nil
	case d.verdict != elsewhere || d.multihost || d.choice.node == "" && d.waitForConsumer:
		// Not served; a multihost claim (its elected instance provisions
		// it, and Provision says what is wrong); a WaitForFirstConsumer
		// claim that waits for the scheduler.
		return nil, nil
	}
	e, err := s.unowned(d)
	if e == nil {
		return nil, err
	}
	speaks, err := s.prov.acts(responsibility.Speak, claim, d)
	if err != nil || !speaks {
		return nil, err
	}
	return e, nil
}

// unowned returns the Warning for a claim that no instance serves (under
// the decision d, for another node than this one), or nil when the
// instance of its node serves it.
func (s *ClaimSync) unowned(d decision) (*event, error) {
	c := d.choice
	if c.node == "" {
		return &event{v1.EventTypeWarning, ReasonNoNode, fmt.Sprintf(
			"The claim names no node and its StorageClass %q binds immediately: add the annotation %s: <node name> to the claim, or use a StorageClass with volumeBindingMode WaitForFirstConsumer",
			d.class.Name, hostpathv1.AnnotationProvisionOnNode)}, nil
	}
	gone, err := s.prov.nodeGone(c.node)
	switch {
	case err != nil || gone.reason == "":
		return nil, err
	case gone.reason == ReasonNodeNotFound:
		return &event{v1.EventTypeWarning, ReasonNodeNotFound, fmt.Sprintf(
			"Node %q named by %s does not exist: set %s to the name of an existing node",
			c.node, c.source, hostpathv1.AnnotationProvisionOnNode)}, nil
	case gone.controlPlane:
		return &event{v1.EventTypeWarning, ReasonNoInstance, fmt.Sprintf(
			"No hostpath provisioner runs on node %q named by %s: %s; pick a node that is not a control-plane node",
			c.node, c.source, controlPlaneOptIn)}, nil
	}
	return &event{v1.EventTypeWarning, ReasonNoInstance, fmt.Sprintf(
		"No hostpath provisioner runs on node %q named by %s: pick a node where the provisioner DaemonSet runs, or make it run there",
		c.node, c.source)}, nil
}

// controlPlaneOptIn says why the node agents are not on a control-plane
// node.
const controlPlaneOptIn = "it is a control-plane node, and hostpath volumes are made on control-plane nodes only if the cluster administrator adds the node agents there with the kustomize component " +
	ControlPlaneComponent + " (control-plane nodes are opt-in)"

// rescheduleMessage says why a claim of verdict reschedule goes back to the
// scheduler.
func rescheduleMessage(d decision) string {
	why := "does not exist any more"
	switch {
	case d.gone.reason == ReasonNoInstance && d.gone.controlPlane:
		why = "runs no hostpath provisioner (" + controlPlaneOptIn + ")"
	case d.gone.reason == ReasonNoInstance:
		why = "runs no hostpath provisioner"
	}
	return fmt.Sprintf("Node %q, which the scheduler selected, %s: removing %s so that the scheduler picks another node",
		d.choice.node, why, storagehelpers.AnnSelectedNode)
}

// recordOnce emits an event on a claim once per distinct reason and message.
func (s *ClaimSync) recordOnce(claim *v1.PersistentVolumeClaim, e event) {
	key := e.reason + "\x00" + e.message
	s.mu.Lock()
	seen := s.reported[claim.UID]
	if seen == nil {
		seen = map[string]bool{}
		s.reported[claim.UID] = seen
	}
	done := seen[key]
	seen[key] = true
	s.mu.Unlock()
	if !done {
		s.recorder.Event(claim, e.eventType, e.reason, e.message)
	}
}

// selectNode sets the selected-node annotation of a claim to this node, so
// that the library provisions it without waiting for a pod, and says so in a
// Normal event. The merge patch carries the claim's resourceVersion: if the
// claim changed meanwhile, the patch fails with a conflict, and the update
// that the informer then delivers queues the claim again.
func (s *ClaimSync) selectNode(ctx context.Context, claim *v1.PersistentVolumeClaim, choice nodeChoice) error {
	node := s.prov.cfg.Node
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": claim.ResourceVersion,
		"annotations":     map[string]string{storagehelpers.AnnSelectedNode: node},
	}})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = s.prov.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name,
		types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	logger := klog.FromContext(ctx)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		logger.V(2).Info("The claim changed before its selected node was set", "node", node, "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("set the selected node of claim %s to %q: %w", klog.KObj(claim), node, err)
	}
	logger.V(2).Info("Set the selected node of a pinned claim", "node", node, "annotation", choice.source)
	msg := fmt.Sprintf("Selected node %q from the annotation %s without waiting for a consumer", node, choice.source)
	if choice.source == sourceChoice {
		msg = fmt.Sprintf("Selected node %q, the node of the clone's source: the clone is made there, and its pods run there", node)
	}
	s.recordOnce(claim, event{v1.EventTypeNormal, ReasonNodeSelected, msg})
	return nil
}
