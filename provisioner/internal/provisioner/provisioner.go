package provisioner

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/responsibility"
)

// VolumeManager is what the provisioner needs of a node's manager
// (*managerapi.Client).
type VolumeManager interface {
	// ListVolumes lists the volume directories of a pool with their owners.
	ListVolumes(ctx context.Context, pool string) (*managerapi.VolumeList, error)
	// GetVolume reads one volume directory and its owner.
	GetVolume(ctx context.Context, pool, name string) (*managerapi.Volume, error)
	// CreateVolume creates (or finds) a volume directory for req.Owner;
	// idempotent for the same owner, 409 OwnerConflict for another.
	CreateVolume(ctx context.Context, pool, name string, req managerapi.CreateVolumeRequest) (*managerapi.Volume, error)
	// CloneVolume starts, or follows, the copy of another volume into a
	// new volume directory for req.Owner.
	CloneVolume(ctx context.Context, pool, name string, req managerapi.CloneVolumeRequest) (*managerapi.Clone, error)
	// SetOwner compares and swaps the owner record of a directory.
	SetOwner(ctx context.Context, pool, name string, req managerapi.SetOwnerRequest) (*managerapi.Volume, error)
	// DeleteVolume removes a volume directory of opts.Owner; deleting a
	// missing one succeeds.
	DeleteVolume(ctx context.Context, pool, name string, opts managerapi.DeleteOptions) error
}

var _ VolumeManager = &managerapi.Client{}

// NodeGetter gets a Node by name (*nodes.Lookup): a Node that does not
// exist is a NotFound error, as from a lister.
type NodeGetter interface {
	Get(name string) (*v1.Node, error)
}

// TargetLister lists the nodes of multihost volumes
// (*managers.Resolver), from the host definer's HostDefinitions.
type TargetLister interface {
	// Targets returns the sorted nodes of pool: ready, whose HostDefinition
	// of the pool is Ready and whose manager can be called now, and
	// pending, whose definition is PendingForCreation, or Ready while the
	// manager is not. Both are empty when no node is defined for pool.
	Targets(pool string) (ready, pending []string, err error)
}

// Config holds what a Provisioner depends on.
type Config struct {
	// Names are the provisioner names StorageClasses use: the configured
	// one and hostpathv1.CapacityProvisionerName.
	Names hostpathv1.ProvisionerNames
	// Node is the node this instance runs on.
	Node string
	// Client reads PersistentVolumes live (reuse) and, in the claim sync,
	// writes claims (the selected-node annotation). Delete does not write
	// the PV: the library deletes it, and the reclaim controller removes
	// its finalizer.
	Client kubernetes.Interface
	// Classes reads StorageClasses from the informer cache.
	Classes storagelisters.StorageClassLister
	// Claims reads claims from the informer cache: the sources of clones.
	Claims corelisters.PersistentVolumeClaimLister
	// Nodes reads Nodes: this instance's from the cache of its own Node,
	// another on demand (nodes.Lookup).
	Nodes NodeGetter
	// Volumes reads PersistentVolumes from the informer cache: which
	// volumes name a directory (reuse, adoption, conflict messages).
	Volumes corelisters.PersistentVolumeLister
	// Instances are the live instances: the rule of who acts for a claim
	// or a PV (package responsibility) elects among them.
	Instances responsibility.Instances
	// Managers returns the manager of a node. Its error only says that
	// none can be called now: the caller retries.
	Managers func(node string) (VolumeManager, error)
	// Targets lists the nodes a multihost volume's directory goes to, by
	// pool.
	Targets TargetLister
	// Reclaim takes a PV's directory to its final state on every node that
	// holds it and returns nil, leaving the PV's finalizer for the reclaim
	// controller to remove once the library has deleted the PV, or fails
	// to be retried (reclaim.Controller.Reclaim: the one deletion path).
	Reclaim func(ctx context.Context, pv *v1.PersistentVolume) error
	// CreateFanout shapes the fan-out of a multihost create to the nodes;
	// its Retryable, when nil, is that of manager errors (transport
	// errors, 5xx, 429).
	CreateFanout fanout.Options
	// FanoutMetrics records the fan-outs; nil records nothing.
	FanoutMetrics *fanout.Metrics
	// Recorder emits the outcome of a multihost create on the claim (which
	// nodes are still pending); nil emits nothing. Only the instance that
	// acts for a claim provisions it, so only that one records. The events of a
	// deletion are Config.Reclaim's (package reclaim).
	Recorder record.EventRecorder
	// CloneWait is how long one Provision call follows a clone's copy
	// (DefaultCloneWait when 0).
	CloneWait time.Duration
	// ClonePoll is how often a clone's copy is asked how far it is
	// (DefaultClonePoll when 0).
	ClonePoll time.Duration
	// ClassWait bounds the wait for a claim's StorageClass that is on its
	// way to the cache (DefaultClassWait when 0; see class).
	ClassWait time.Duration
	// Clock times clones and remembers classes waited for in vain; nil
	// means the real clock.
	Clock clock.PassiveClock
}

// Provisioner is one node's instance of the hostpath provisioner: the
// library's Provisioner, Qualifier and DeletionGuard. It writes nothing but
// through the manager; the claim sync (ClaimSync) writes claims and events.
type Provisioner struct {
	cfg Config
	// rule says whether this instance acts for a claim or a PV.
	rule *responsibility.Rule
	// classMisses holds, by StorageClass name, when class last waited
	// the class wait for that class in vain: it does not wait again for it
	// within classMissMemory (a class deleted under its claims).
	classMisses sync.Map
}

var (
	_ controller.Provisioner      = &Provisioner{}
	_ controller.Qualifier        = &Provisioner{}
	_ controller.DeletionGuard    = &Provisioner{}
	_ controller.BlockProvisioner = &Provisioner{}
)

// clock is cfg.Clock, or the real clock.
func (p *Provisioner) clock() clock.PassiveClock {
	if p.cfg.Clock == nil {
		return clock.RealClock{}
	}
	return p.cfg.Clock
}

// New returns the Provisioner of the instance on cfg.Node.
func New(cfg Config) *Provisioner {
	return &Provisioner{cfg: cfg, rule: responsibility.New(cfg.Node, cfg.Instances, nil)}
}

// SupportsBlock reports false: volumes are directories.
func (p *Provisioner) SupportsBlock(context.Context) bool { return false }
