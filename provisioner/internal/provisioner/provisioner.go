package provisioner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/util"

	"hostpath.dev/manager/pkg/client"
)

// VolumeManager is what the provisioner needs of a node's manager
// (*client.Client).
type VolumeManager interface {
	// ListVolumes lists the volume directories of a pool with their owners.
	ListVolumes(ctx context.Context, pool string) (*client.VolumeList, error)
	// GetVolume reads one volume directory and its owner.
	GetVolume(ctx context.Context, pool, name string) (*client.Volume, error)
	// CreateVolume creates (or finds) a volume directory for req.Owner;
	// idempotent for the same owner, 409 OwnerConflict for another.
	CreateVolume(ctx context.Context, pool, name string, req client.CreateVolumeRequest) (*client.Volume, error)
	// SetOwner compares and swaps the owner record of a directory.
	SetOwner(ctx context.Context, pool, name string, req client.SetOwnerRequest) (*client.Volume, error)
	// DeleteVolume removes a volume directory of opts.Owner; deleting a
	// missing one succeeds.
	DeleteVolume(ctx context.Context, pool, name string, opts client.DeleteOptions) error
}

var _ VolumeManager = &client.Client{}

// Instances is what the provisioner needs to know about its peers.
type Instances interface {
	// IsOwner reports whether this instance is the one elected for key
	// among the live instances.
	IsOwner(key string) (bool, error)
	// OnNode reports whether a provisioner instance runs on node.
	OnNode(node string) (bool, error)
}

// Config holds what a Provisioner depends on.
type Config struct {
	// Name is the provisioner name StorageClasses use.
	Name string
	// Node is the node this instance runs on.
	Node string
	// Client writes claims (the selected-node annotation).
	Client kubernetes.Interface
	// Classes reads StorageClasses from the informer cache.
	Classes storagelisters.StorageClassLister
	// Nodes reads Nodes from the informer cache.
	Nodes corelisters.NodeLister
	// Volumes reads PersistentVolumes from the informer cache: which
	// volumes name a directory (reuse, adoption, conflict messages).
	Volumes corelisters.PersistentVolumeLister
	// Instances tells which instance is elected for claims no node owns.
	Instances Instances
	// Managers returns the manager of a node.
	Managers func(node string) (VolumeManager, error)
	// Recorder emits the provisioner's own events.
	Recorder record.EventRecorder
}

// Provisioner is one node's instance of the hostpath provisioner.
type Provisioner struct {
	cfg Config

	// warned remembers the events already emitted per claim, so that
	// repeated syncs of an unchanged claim add nothing.
	mu     sync.Mutex
	warned map[types.UID]map[string]bool
}

var (
	_ controller.Provisioner      = &Provisioner{}
	_ controller.Qualifier        = &Provisioner{}
	_ controller.DeletionGuard    = &Provisioner{}
	_ controller.BlockProvisioner = &Provisioner{}
)

// New returns the Provisioner of the instance on cfg.Node.
func New(cfg Config) *Provisioner {
	return &Provisioner{cfg: cfg, warned: map[types.UID]map[string]bool{}}
}

// Forget drops what the provisioner remembers about a deleted claim.
func (p *Provisioner) Forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.warned, uid)
}

// SupportsBlock reports false: volumes are directories.
func (p *Provisioner) SupportsBlock(context.Context) bool { return false }

// nodeChoice is the node a claim asks for and where that came from.
type nodeChoice struct {
	node   string
	source string
	// conflict describes annotations that name other nodes, or is "".
	conflict string
}

// chooseNode applies the annotation precedence to a claim.
func chooseNode(claim *v1.PersistentVolumeClaim) nodeChoice {
	var c nodeChoice
	for _, key := range []string{AnnProvisionOnNode, AnnKubevirtProvisionOnNode, AnnSelectedNode} {
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
func (c nodeChoice) pinned() bool { return c.source != AnnSelectedNode }

// class returns the claim's StorageClass if this provisioner serves it.
func (p *Provisioner) class(claim *v1.PersistentVolumeClaim) *storagev1.StorageClass {
	name := util.GetPersistentVolumeClaimClass(claim)
	if name == "" {
		return nil
	}
	class, err := p.cfg.Classes.Get(name)
	if err != nil || class.Provisioner != p.cfg.Name {
		return nil
	}
	return class
}

// ShouldProvision is the Qualifier: it says yes only on the instance that
// owns the claim, and that instance alone emits events or writes the claim.
func (p *Provisioner) ShouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) bool {
	class := p.class(claim)
	if class == nil {
		return false
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pvc", klog.KObj(claim))
	if class.Parameters[ParamMode] == string(ModeMultihost) {
		// One elected instance owns a multihost claim; Provision reports
		// that the mode is not available yet.
		return p.elected(logger, claim)
	}
	choice := chooseNode(claim)
	waitForConsumer := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if choice.node == "" {
		if !waitForConsumer && p.elected(logger, claim) {
			p.warn(claim, v1.EventTypeWarning, ReasonNoNode, fmt.Sprintf(
				"The claim names no node and its StorageClass %q binds immediately: add the annotation %s: <node name> to the claim, or use a StorageClass with volumeBindingMode WaitForFirstConsumer",
				class.Name, AnnProvisionOnNode))
		}
		return false
	}
	if choice.node != p.cfg.Node {
		p.checkForeignNode(logger, claim, choice)
		return false
	}
	if choice.conflict != "" {
		p.warn(claim, v1.EventTypeWarning, ReasonNodeConflict, "Node annotations disagree: "+choice.conflict)
	}
	if waitForConsumer && claim.Annotations[AnnSelectedNode] == "" {
		// The library provisions WaitForFirstConsumer claims only once
		// selected-node is set; set it now rather than wait for a pod.
		if err := p.selectNode(ctx, claim); err != nil {
			logger.Error(err, "Failed to set the selected node", "node", p.cfg.Node)
			return false
		}
		logger.V(2).Info("Set the selected node of a pinned claim", "node", p.cfg.Node, "annotation", choice.source)
		p.warn(claim, v1.EventTypeNormal, ReasonNodeSelected, fmt.Sprintf("Selected node %q from the annotation %s without waiting for a consumer", p.cfg.Node, choice.source))
		return false
	}
	return true
}

// checkForeignNode handles a claim that names another node: if that node does
// not exist or has no instance, the elected instance says so.
func (p *Provisioner) checkForeignNode(logger klog.Logger, claim *v1.PersistentVolumeClaim, choice nodeChoice) {
	_, err := p.cfg.Nodes.Get(choice.node)
	switch {
	case apierrors.IsNotFound(err):
		if p.elected(logger, claim) {
			p.warn(claim, v1.EventTypeWarning, ReasonNodeNotFound, fmt.Sprintf(
				"Node %q named by %s does not exist: set %s to the name of an existing node",
				choice.node, choice.source, AnnProvisionOnNode))
		}
		return
	case err != nil:
		logger.Error(err, "Failed to read the node", "node", choice.node)
		return
	}
	running, err := p.cfg.Instances.OnNode(choice.node)
	if err != nil {
		logger.Error(err, "Failed to look up the provisioner on the node", "node", choice.node)
		return
	}
	if !running && p.elected(logger, claim) {
		p.warn(claim, v1.EventTypeWarning, ReasonNoInstance, fmt.Sprintf(
			"No hostpath provisioner runs on node %q named by %s: pick a node where the provisioner DaemonSet runs, or make it run there",
			choice.node, choice.source))
	}
}

// elected reports whether this instance is the one that speaks for a claim
// that no node owns.
func (p *Provisioner) elected(logger klog.Logger, claim *v1.PersistentVolumeClaim) bool {
	ok, err := p.cfg.Instances.IsOwner(string(claim.UID))
	if err != nil {
		logger.Error(err, "Failed to elect the instance for the claim")
		return false
	}
	return ok
}

// warn emits an event on a claim once per distinct reason and message.
func (p *Provisioner) warn(claim *v1.PersistentVolumeClaim, eventType, reason, message string) {
	key := reason + "\x00" + message
	p.mu.Lock()
	seen := p.warned[claim.UID]
	if seen == nil {
		seen = map[string]bool{}
		p.warned[claim.UID] = seen
	}
	done := seen[key]
	seen[key] = true
	p.mu.Unlock()
	if !done {
		p.cfg.Recorder.Event(claim, eventType, reason, message)
	}
}

// selectNode sets the selected-node annotation of a claim to this node. The
// patch carries the resourceVersion, so a concurrent change wins and the
// claim is looked at again.
func (p *Provisioner) selectNode(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": claim.ResourceVersion,
		"annotations":     map[string]string{AnnSelectedNode: p.cfg.Node},
	}})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = p.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name,
		types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("patch claim %s: %w", klog.KObj(claim), err)
	}
	return nil
}

// ShouldDelete is the DeletionGuard: only the instance of the PV's node
// deletes it.
func (p *Provisioner) ShouldDelete(_ context.Context, pv *v1.PersistentVolume) bool {
	return pv.Annotations[AnnNode] == p.cfg.Node && pv.Annotations[AnnMode] != string(ModeMultihost)
}
