// Package foreign measures what a hostpath provisioner instance costs per
// node and per claim of another provisioner at fleet scale, on the running
// local cluster: over a fleet of K fake nodes (package fleet), each with its
// own manager and provisioner process, it reads the resident memory (VmRSS)
// and CPU time (utime+stime) of every fleet provisioner and of the real
// nodes' provisioners (/proc), and the API server's watch events for
// claims, at these steps:
//
//   - hostpath volumes, before the fleet starts (unless Options.Volumes
//     and Options.MultihostVolumes are both 0): in a fresh namespace,
//     Volumes node-mode claims of VolumesClass (Immediate), pinned to the
//     real nodes in turn with hostpath.dev/provision-on-node, created
//     Workers at a time, Bound, deleted and their PVs gone; then the
//     same with MultihostVolumes claims of MultihostClass (ReadWriteMany).
//     Both classes are made once per Run, and waited for until the host
//     definer lists them in hostpath-classes (the claim-labelling
//     policy's parameters), so that their claims are labelled by mode.
//     For each part, the API server's watch events of claims and of PVs,
//     from the counters steady before to the counters steady after (late
//     events count): the baseline of the real nodes' instances alone;
//   - before: the real nodes' provisioners, before the fleet starts
//     (Settle after the volumes, when they were made);
//   - up: once the K members run, each with a Ready HostDefinition of the
//     pool (so every instance caches 2K more pods and K more
//     HostDefinitions; Nodes, only its own);
//   - idle: Settle later. The real nodes' growth from before, over K, is
//     the per-node cost in every instance's caches; the CPU time from up
//     is each instance's idle rate;
//   - annotated: N claims of the StorageClass ClassName of the provisioner
//     Provisioner (Immediate; nothing serves it) created in a fresh
//     namespace, read at once when kube-controller-manager has annotated
//     every one with that provisioner: the CPU time from idle is what
//     receiving their watch events cost;
//   - claims: Settle later: the memory the claims cost;
//   - deleted: the namespace deleted and its claims gone, the class
//     deleted, Settle later;
//   - hostpath volumes again, with the K instances up: each fleet
//     instance should receive only the node-mode claims' pending-state
//     events (a claim is labelled hostpath.dev/node=Unsorted until it is
//     bound, api/hostpath/v1/nodelabel.go), and every multihost claim's
//     and PV's. After the fleet's readings, so that their CPU time and
//     memory are in none of them;
//   - then every fleet Node's status updated once, as a kubelet reports
//     it (the Ready condition's heartbeat), and the API server's watch
//     events for Nodes counted until they stop growing: per update, how
//     many watchers get a Node's updates (an instance watching every Node
//     is one; one watching only its own Node, not). Last, so that its
//     CPU time is in no figure above.
//
// The provisioner caches no claim of another provisioner
// (provisioner/internal/app/cachetrim filters its lists and watches), but
// the API server still sends every instance every claim's events. The
// namespaces and the classes are deleted at the end, also on failure, and
// the fleet closed. Summarize and Report make the figures of a Result.
package foreign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"

	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/framework/localcluster"
	"hostpath.dev/tools/internal/fleet"
)

const (
	// Provisioner is the claims' provisioner, which nothing serves.
	Provisioner = "foreign.bench.example"
	// ClassName is the claims' StorageClass, made and deleted by Run.
	ClassName = "hostpath-bench-fleet-foreign"
	// NamespacePrefix starts the name of the claims' namespace.
	NamespacePrefix = "hostpath-bench-fleet-foreign-"
	// annStorageProvisioner is what kube-controller-manager annotates a
	// claim of an external provisioner with.
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// chunk is how many claims are created between two progress lines at
	// most, Options.Workers at a time.
	chunk = 1000
)

// Options say what to measure.
type Options struct {
	// Fleet makes the fleet.
	Fleet fleet.Options
	// Claims is N, the claims of the other provisioner.
	Claims int
	// Instances is K, the fleet's size.
	Instances int
	// Settle is the wait before each memory reading but up and annotated:
	// the Go runtime returns the memory of a burst gradually.
	Settle time.Duration
	// Pool is the pool whose Ready HostDefinition makes a member up.
	Pool string
	// Workers is how many claims are created at once.
	Workers int
	// Timeout bounds each wait.
	Timeout time.Duration
	// Volumes is M, the node-mode volumes of each run of the hostpath
	// volumes step, and MultihostVolumes H, its multihost volumes; the
	// step is off when both are 0.
	Volumes          int
	MultihostVolumes int
	// Logf prints progress.
	Logf cli.Printf
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch {
	case o.Claims < 1:
		return fmt.Errorf("the claims must be at least 1, not %d", o.Claims)
	case o.Instances < 1 || o.Instances > fleet.MaxMembers:
		return fmt.Errorf("the instances must be 1 to %d, not %d", fleet.MaxMembers, o.Instances)
	case o.Settle < 0 || o.Timeout <= 0 || o.Workers < 1:
		return errors.New("the settle time must not be negative, the timeout and workers must be positive")
	case o.Pool == "":
		return errors.New("the pool must not be empty")
	case o.Volumes < 0 || o.MultihostVolumes < 0:
		return fmt.Errorf("the volumes (%d) and multihost volumes (%d) must not be negative", o.Volumes, o.MultihostVolumes)
	}
	return o.Fleet.Validate()
}

// Result is what Run measured; Summary is Summarize of the rest.
type Result struct {
	// Date is when the run started; Provisioner, Claims, Instances and
	// SettleSeconds are what it measured with; RealNodes are the nodes with
	// a kubelet.
	Date          time.Time `json:"date"`
	Provisioner   string    `json:"provisioner"`
	Claims        int       `json:"claims"`
	Instances     int       `json:"instances"`
	SettleSeconds float64   `json:"settleSeconds"`
	RealNodes     []string  `json:"realNodes"`
	// CreateSeconds: from the first claim's create until the last's
	// returned; AnnotateSeconds: from the first create until every claim
	// was seen annotated; DeleteSeconds: from the namespace's deletion
	// until it and its claims were gone.
	CreateSeconds   float64 `json:"createSeconds"`
	AnnotateSeconds float64 `json:"annotateSeconds"`
	DeleteSeconds   float64 `json:"deleteSeconds"`
	// NodeUpdates is how many Node status updates the heartbeats step made
	// (one per fleet Node); NodeWatch the API server's watch events for
	// Nodes from before them until those stopped growing, nil when not
	// read.
	NodeUpdates int          `json:"nodeUpdates"`
	NodeWatch   *WatchCounts `json:"nodeWatch,omitempty"`
	// The readings of the steps, in order (the package says when).
	Before     Reading `json:"before"`
	Up         Reading `json:"up"`
	Idle       Reading `json:"idle"`
	Annotated  Reading `json:"annotated"`
	WithClaims Reading `json:"withClaims"`
	Deleted    Reading `json:"deleted"`
	// Volumes and MultihostVolumes are what the hostpath volumes step was
	// asked to make per run (M and H); VolumeRuns its runs, in order: the
	// baseline without the fleet, then with it.
	Volumes          int          `json:"volumes"`
	MultihostVolumes int          `json:"multihostVolumes"`
	VolumeRuns       []VolumesRun `json:"volumeRuns,omitempty"`
	Summary          Summary      `json:"summary"`
}

// Reading is the provisioners' usage and the API server's claim watch
// counters at one time.
type Reading struct {
	At time.Time `json:"at"`
	// Fleet is the fleet's provisioners, Real the real nodes'.
	Fleet []fleet.NodeUsage `json:"fleet,omitempty"`
	Real  []fleet.NodeUsage `json:"real,omitempty"`
	// Watch is nil when the API server's metrics could not be read.
	Watch *WatchCounts `json:"watch,omitempty"`
}

// Run measures. kube must not be rate limited (the benchmark's own
// client); hp reads the HostDefinitions.
func Run(ctx context.Context, kube kubernetes.Interface, hp hostpathclient.Interface, o Options) (res Result, err error) {
	if err := o.Validate(); err != nil {
		return res, err
	}
	real, err := localcluster.RealNodes(ctx, kube)
	if err != nil {
		return res, err
	}
	res = Result{
		Date: time.Now().UTC(), Provisioner: Provisioner, Claims: o.Claims, Instances: o.Instances,
		SettleSeconds: o.Settle.Seconds(), RealNodes: real, Volumes: o.Volumes, MultihostVolumes: o.MultihostVolumes,
	}
	defer func() { res.Summary = Summarize(res) }()
	p := &phase{kube: kube, hp: hp, o: o, res: &res, metrics: apimetrics.APIServerMetrics(kube)}
	if res.Before, err = p.read(ctx); err != nil {
		return res, err
	}
	if len(res.Before.Real) != len(real) {
		return res, fmt.Errorf("found the %s process of %d of the %d real nodes %v (is hostpath deployed and running?)",
			fleet.ProvisionerProgram, len(res.Before.Real), len(real), real)
	}
	deleteClasses, err := p.baseline(ctx)
	if err != nil {
		return res, err
	}
	defer deleteClasses()
	cleanup, err := p.setup(ctx)
	if err != nil {
		return res, err
	}
	defer cleanup()
	if p.fleet, err = fleet.New(ctx, kube, o.Fleet); err != nil {
		return res, err
	}
	defer func() {
		o.Logf.Printf("Closing the fleet of %d nodes", len(p.fleet.Nodes()))
		err = errors.Join(err, p.fleet.Close(ctx))
	}()
	for _, step := range []func(context.Context) error{p.start, p.fill, p.empty, p.volumesUp, p.heartbeats} {
		if err := step(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// baseline makes the hostpath volumes step's classes and runs it before
// the fleet starts, then takes the before reading again Settle later, so
// that the volumes' burst is in no figure of the fleet; deleteClasses
// deletes the classes. Nothing is done when the step is off.
func (p *phase) baseline(ctx context.Context) (deleteClasses func(), err error) {
	if p.o.Volumes == 0 && p.o.MultihostVolumes == 0 {
		return func() {}, nil
	}
	if deleteClasses, err = p.makeVolumeClasses(ctx); err != nil {
		return nil, err
	}
	if err := p.volumesBefore(ctx); err != nil {
		deleteClasses()
		return nil, err
	}
	if p.res.Before, err = p.settledRead(ctx, "before"); err != nil {
		deleteClasses()
		return nil, err
	}
	return deleteClasses, nil
}

// phase is a Run in progress.
type phase struct {
	kube    kubernetes.Interface
	hp      hostpathclient.Interface
	o       Options
	res     *Result
	metrics func(context.Context) ([]byte, error)
	fleet   *fleet.Fleet
	// ns is the claims' namespace, claims an informer cache of its claims
	// (their metadata).
	ns     string
	claims corelisters.PersistentVolumeClaimLister
}
