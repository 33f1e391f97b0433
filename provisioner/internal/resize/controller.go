package resize

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/worker"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/responsibility"
)

// Config holds what a Controller depends on.
type Config struct {
	// ProvisionerNames are the provisioner names: only claims bound to PVs
	// whose pv.kubernetes.io/provisioned-by says one of them are grown.
	ProvisionerNames hostpathv1.ProvisionerNames
	// Node is the node this instance runs on.
	Node string
	// FieldManager is the field manager of the claim and PV patches.
	FieldManager string
	// Client patches claims (their status) and PVs.
	Client kubernetes.Interface
	// Claims is the shared PersistentVolumeClaim informer that drives the
	// controller; it is read only through its lister.
	Claims coreinformers.PersistentVolumeClaimInformer
	// Volumes is the shared PersistentVolume informer: a PV that reaches
	// the cache after its claim queues the claim.
	Volumes coreinformers.PersistentVolumeInformer
	// Classes is the shared StorageClass informer, read through its
	// lister: only classes with allowVolumeExpansion let claims grow.
	Classes storageinformers.StorageClassInformer
	// Instances are the live instances, among which the instance that
	// grows a multihost volume is elected (package responsibility).
	Instances responsibility.Instances
	// Managers returns the manager of a node.
	Managers func(node string) (Manager, error)
	// Fanout shapes the calls to the managers of a volume's nodes (one
	// node in node mode); its Retryable, when nil, retries answers that
	// may pass (no answer, 429, 5xx but 507).
	Fanout fanout.Options
	// Recorder emits events on claims.
	Recorder record.EventRecorder
}

// Controller grows the volumes of bound claims whose request went up (see
// the package doc), in the shape of Kubernetes' sample-controller: the
// informers queue claim keys, workers sync one key at a time from the
// listers, failures are retried with backoff (package worker).
type Controller struct {
	cfg     Config
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	synced  []cache.InformerSynced
	queue   *worker.Queue[string]
	// rule says whether this instance grows a volume.
	rule *responsibility.Rule
	// now is the time of condition transitions (metav1.Now; fixed in
	// tests).
	now func() metav1.Time
	// watchErr is the failure to register the event handlers, returned
	// by Run.
	watchErr error
}

// NewController returns the Controller of the instance on cfg.Node and
// registers its event handlers with cfg.Claims and cfg.Volumes; start the
// informers after it.
func NewController(cfg Config) *Controller {
	if cfg.Fanout.Retryable == nil {
		cfg.Fanout.Retryable = managerapi.Retryable
	}
	c := &Controller{
		cfg:     cfg,
		claims:  cfg.Claims.Lister(),
		volumes: cfg.Volumes.Lister(),
		classes: cfg.Classes.Lister(),
		synced: []cache.InformerSynced{cfg.Claims.Informer().HasSynced, cfg.Volumes.Informer().HasSynced,
			cfg.Classes.Informer().HasSynced},
		rule: responsibility.New(cfg.Node, cfg.Instances, nil),
		now:  metav1.Now,
	}
	c.queue = worker.NewQueue("resize", c.sync)
	_, errClaims := cfg.Claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: c.claimUpdated,
	})
	_, errVolumes := cfg.Volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: c.volumeUpdated,
	})
	c.watchErr = errors.Join(errClaims, errVolumes)
	return c
}

// Run waits for the caches, then syncs claims with workers goroutines until
// ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if c.watchErr != nil {
		c.queue.ShutDown()
		return fmt.Errorf("watch PersistentVolumeClaims and PersistentVolumes: %w", c.watchErr)
	}
	klog.FromContext(ctx).Info("Starting the resize controller")
	return c.queue.Run(ctx, workers, c.synced...)
}

// claimUpdated queues a claim on a resync, or when its request, its volume
// or its phase changed. A change of its status alone (the resizer's own
// patches among them) queues nothing: a sync does every step at once, and
// a failure is retried by the queue, with backoff.
func (c *Controller) claimUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*v1.PersistentVolumeClaim)
	claim, ok2 := obj.(*v1.PersistentVolumeClaim)
	if !ok1 || !ok2 {
		return
	}
	oldRequest, newRequest := old.Spec.Resources.Requests[v1.ResourceStorage], claim.Spec.Resources.Requests[v1.ResourceStorage]
	if old.ResourceVersion == claim.ResourceVersion || oldRequest.Cmp(newRequest) != 0 ||
		old.Spec.VolumeName != claim.Spec.VolumeName || old.Status.Phase != claim.Status.Phase {
		c.claimChanged(claim)
	}
}

// claimChanged queues a claim that this instance may have to work on: Bound
// to a PV of this provisioner, of this node or multihost, that needs a step
// (nextStep).
func (c *Controller) claimChanged(obj any) {
	claim, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok || claim.Status.Phase != v1.ClaimBound || claim.Spec.VolumeName == "" {
		return
	}
	pv, err := c.volumes.Get(claim.Spec.VolumeName)
	if err != nil {
		return // the PV's arrival in the cache queues the claim
	}
	c.queueIfOurs(claim, pv)
}

// volumeUpdated queues the claim of a PV on a resync or when the PV's claim
// changed: growing is driven by claims, and a PV's own changes (the
// resizer's patch of its capacity among them) need nothing.
func (c *Controller) volumeUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*v1.PersistentVolume)
	pv, ok2 := obj.(*v1.PersistentVolume)
	if !ok1 || !ok2 {
		return
	}
	if old.ResourceVersion == pv.ResourceVersion || claimUID(old) != claimUID(pv) {
		c.volumeChanged(pv)
	}
}

// volumeChanged queues the claim of a PV of this provisioner.
func (c *Controller) volumeChanged(obj any) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil {
		return
	}
	claim, err := c.claims.PersistentVolumeClaims(pv.Spec.ClaimRef.Namespace).Get(pv.Spec.ClaimRef.Name)
	if err != nil || claim.Status.Phase != v1.ClaimBound || claim.Spec.VolumeName != pv.Name {
		return
	}
	c.queueIfOurs(claim, pv)
}

// queueIfOurs queues claim, bound to pv, when pv is a volume of this
// provisioner that this instance may grow (of its node, or multihost) and
// the claim needs a step.
func (c *Controller) queueIfOurs(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
	vol, ok := hostpathv1.VolumeDirectoryOf(pv, c.cfg.ProvisionerNames)
	if !ok || !vol.Multihost && !vol.On(c.cfg.Node) || claimUID(pv) != claim.UID {
		return
	}
	if s, _ := nextStep(claim, pv); s == stepNone {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(claim)
	if err != nil {
		return
	}
	c.queue.Add(key)
}

// claimUID is the UID of the claim pv is bound to, "" when none.
func claimUID(pv *v1.PersistentVolume) types.UID {
	if pv.Spec.ClaimRef == nil {
		return ""
	}
	return pv.Spec.ClaimRef.UID
}

// sync brings one claim, read from the listers, to its next state.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // never queued
	}
	claim, err := c.claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get claim %s from the cache: %w", key, err)
	}
	if claim.Status.Phase != v1.ClaimBound || claim.Spec.VolumeName == "" {
		return nil
	}
	pv, err := c.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get PersistentVolume %q from the cache: %w", claim.Spec.VolumeName, err)
	}
	vol, ok := hostpathv1.VolumeDirectoryOf(pv, c.cfg.ProvisionerNames)
	if !ok || claimUID(pv) != claim.UID {
		return nil
	}
	next, size := nextStep(claim, pv)
	if next == stepNone {
		return nil
	}
	if acts, err := c.acts(pv, vol); err != nil || !acts {
		return err
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pvc", klog.KObj(claim), "pv", klog.KObj(pv))
	ctx = klog.NewContext(ctx, logger)
	if next == stepGrow {
		allowed, err := c.expansionAllowed(ctx, claim)
		if err != nil || !allowed {
			return err
		}
		return c.grow(ctx, claim, pv, vol, size)
	}
	return c.finish(ctx, claim, size, fmt.Sprintf("Resized volume %q to %s", pv.Name, size.String()))
}

// acts reports whether this instance grows vol (responsibility.Grow).
func (c *Controller) acts(pv *v1.PersistentVolume, vol hostpathv1.VolumeDirectory) (bool, error) {
	a, err := c.rule.Acts(responsibility.Grow, responsibility.Object{Key: string(pv.UID), Multihost: vol.Multihost, Node: vol.Node})
	if err != nil {
		return false, fmt.Errorf("decide whether to grow PersistentVolume %q: %w", pv.Name, err)
	}
	return a.Acts, nil
}

// expansionAllowed reports whether the claim's StorageClass exists and has
// allowVolumeExpansion. Without, the API server refuses larger requests,
// and nothing is done.
func (c *Controller) expansionAllowed(ctx context.Context, claim *v1.PersistentVolumeClaim) (bool, error) {
	name := storageClassOf(claim)
	if name == "" {
		return false, nil
	}
	class, err := c.classes.Get(name)
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(4).Info("No StorageClass: the claim is not grown", "storageClass", name)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get StorageClass %q from the cache: %w", name, err)
	}
	if !allowsExpansion(class) {
		klog.FromContext(ctx).V(4).Info("The StorageClass does not allow volume expansion: the claim is not grown", "storageClass", name)
		return false, nil
	}
	return true, nil
}

// storageClassOf returns the StorageClass name of claim.
func storageClassOf(claim *v1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return claim.Annotations[v1.BetaStorageClassAnnotation]
}

// allowsExpansion reports whether class lets claims grow.
func allowsExpansion(class *storagev1.StorageClass) bool {
	return class.AllowVolumeExpansion != nil && *class.AllowVolumeExpansion
}

// grow takes claim, bound to pv, to size: it marks the claim, asks the
// managers, grows the PV and finishes the claim (steps 3 to 6), or records
// the failure.
func (c *Controller) grow(ctx context.Context, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, vol hostpathv1.VolumeDirectory, size resource.Quantity) error {
	logger := klog.FromContext(ctx)
	what := fmt.Sprintf("volume %q", pv.Name)
	bytes, fits := sizeBytes(size)
	switch {
	case !fits:
		return c.fail(ctx, claim, size, outcome{kind: infeasible, message: fmt.Sprintf(
			"Cannot grow %s to %s: more than the largest volume size of %d bytes", what, size.String(), maxSize.Value())})
	case vol.Pool == "" || vol.Directory == "" || len(vol.Holders()) == 0:
		return c.fail(ctx, claim, size, outcome{kind: infeasible, message: fmt.Sprintf(
			"Cannot grow %s: the PersistentVolume names no pool, directory or node", what)})
	}
	claim, marked, err := writeStatus(ctx, c.cfg.Client, c.cfg.FieldManager, claim, resizingState(claim, size, c.now()))
	if err != nil {
		return err
	}
	if marked {
		c.cfg.Recorder.Eventf(claim, v1.EventTypeNormal, ReasonResizing, "Growing %s (directory %q in pool %q) to %s on %s",
			what, vol.Directory, vol.Pool, size.String(), fanout.NodeList(vol.Holders()))
	}
	logger.V(2).Info("Growing the volume", "size", size.String(), "bytes", bytes, "nodes", vol.Holders())
	o := outcomeOf(what, size, c.setSize(ctx, pv.Name, vol, bytes))
	if o.kind != grown {
		return c.fail(ctx, claim, size, o)
	}
	if err := c.growVolume(ctx, pv, size); err != nil {
		return err
	}
	return c.finish(ctx, claim, size, o.message)
}

// setSize asks the manager of every node of vol, in parallel, to grow the
// directory of the PV named owner to bytes; one result per node, in order.
func (c *Controller) setSize(ctx context.Context, owner string, vol hostpathv1.VolumeDirectory, bytes int64) []result {
	var mu sync.Mutex
	vols := map[string]*managerapi.Volume{}
	r := fanout.Run(ctx, vol.Holders(), func(ctx context.Context, node string) error {
		mgr, err := c.cfg.Managers(node)
		if err != nil {
			return fmt.Errorf("find the manager: %w", err)
		}
		v, err := mgr.SetSize(ctx, vol.Pool, vol.Directory, managerapi.SetSizeRequest{Owner: owner, SizeBytes: bytes})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		vols[node] = v
		return nil
	}, c.cfg.Fanout)
	results := make([]result, len(r.Nodes))
	for i, n := range r.Nodes {
		results[i] = result{node: n.Node, vol: vols[n.Node], err: n.Err}
	}
	return results
}

// growVolume sets the capacity of pv to size (step 5), unless it is that
// large already, with a merge patch of that one key.
func (c *Controller) growVolume(ctx context.Context, pv *v1.PersistentVolume, size resource.Quantity) error {
	if current := pv.Spec.Capacity[v1.ResourceStorage]; current.Cmp(size) >= 0 {
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"capacity":{%q:%q}}}`, v1.ResourceStorage, size.String())
	_, err := c.cfg.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: c.cfg.FieldManager})
	if err != nil {
		return fmt.Errorf("set the capacity of PersistentVolume %q to %s: %w", pv.Name, size.String(), err)
	}
	klog.FromContext(ctx).V(2).Info("Grew the PersistentVolume", "size", size.String())
	return nil
}

// finish writes the finished state of claim, whose PV has size (step 6),
// and, when it wrote, emits VolumeResizeSuccessful with message. A claim
// found finished already (a sync after a crash) gets no event.
func (c *Controller) finish(ctx context.Context, claim *v1.PersistentVolumeClaim, size resource.Quantity, message string) error {
	_, wrote, err := writeStatus(ctx, c.cfg.Client, c.cfg.FieldManager, claim, finishedState(claim, size))
	if err != nil {
		return err
	}
	if wrote {
		klog.FromContext(ctx).V(2).Info("Finished the resize of the claim", "size", size.String())
		c.cfg.Recorder.Event(claim, v1.EventTypeNormal, ReasonResizeSuccessful, message)
	}
	return nil
}

// fail records an infeasible or failed growth of claim to size: the claim's
// status (failedState) and a Warning event. A failed one is returned as an
// error, to retry with backoff; an infeasible one waits for the user.
func (c *Controller) fail(ctx context.Context, claim *v1.PersistentVolumeClaim, size resource.Quantity, o outcome) error {
	c.cfg.Recorder.Event(claim, v1.EventTypeWarning, ReasonResizeFailed, o.message)
	_, _, err := writeStatus(ctx, c.cfg.Client, c.cfg.FieldManager, claim, failedState(claim, size, o, c.now()))
	if o.kind == failed {
		return errors.Join(o.err, err)
	}
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("The claim cannot grow until its request changes", "size", size.String(), "reason", o.message)
	return nil
}
