// Package app is the provisioner program, in three steps: Options (its flags,
// and Validate), Complete, which builds from valid Options what the program
// needs (clients, informers, manager discovery, event recorder, metrics) as a
// Config, and Config.Run, which wires the parts (the library's
// ProvisionController with the Provisioner, the claim sync, the reclaim
// controller, the orphan sweeper, the usage refresher, the capacity
// publisher) and runs them.
package app

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/profiling"
	"hostpath.dev/provisioner/internal/capacity"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/reclaim"
	"hostpath.dev/provisioner/internal/usage"
)

// Flag names.
const (
	FlagNodeName              = "node-name"
	FlagProvisionerName       = "provisioner-name"
	FlagKubeconfig            = "kubeconfig"
	FlagKubeAPIQPS            = "kube-api-qps"
	FlagKubeAPIBurst          = "kube-api-burst"
	FlagEventQPS              = "event-qps"
	FlagEventBurst            = "event-burst"
	FlagWorkers               = "workers"
	FlagResyncPeriod          = "resync-period"
	FlagMetricsAddress        = "metrics-address"
	FlagNamespace             = "namespace"
	FlagInstanceSelector      = "instance-selector"
	FlagManagerNamespace      = "manager-namespace"
	FlagManagerSelector       = "manager-selector"
	FlagManagerPort           = "manager-port"
	FlagManagerURL            = "manager-url"
	FlagManagerCAFile         = "manager-ca-file"
	FlagManagerServerName     = "manager-server-name"
	FlagManagerTokenFile      = "manager-token-file"
	FlagManagerTimeout        = "manager-timeout"
	FlagManagerDeleteTimeout  = "manager-delete-timeout"
	FlagOrphanSweepPeriod     = "orphan-sweep-period"
	FlagNodeGoneGracePeriod   = "node-gone-grace-period"
	FlagNodeGoneScanPeriod    = "node-gone-scan-period"
	FlagOrphanGracePeriod     = "orphan-grace-period"
	FlagUsageInterval         = "usage-interval"
	FlagUsageWarningThreshold = "usage-warning-threshold"
	FlagFanoutWorkers         = "fanout-workers"
	FlagFanoutNodeTimeout     = "fanout-node-timeout"
	FlagFanoutAttempts        = "fanout-attempts"
	FlagCapacityInterval      = "capacity-interval"
)

// Environment variables that give flags their default.
const (
	// EnvNodeName is the fallback of --node-name (downward API spec.nodeName).
	EnvNodeName = "NODE_NAME"
	// EnvPodNamespace is the fallback of --namespace and --manager-namespace
	// (downward API metadata.namespace).
	EnvPodNamespace = "POD_NAMESPACE"
)

// Defaults.
const (
	// DefaultProvisionerName is hostpathv1's, which the host definer
	// uses too.
	DefaultProvisionerName = hostpathv1.DefaultProvisionerName
	// DefaultKubeAPIQPS and DefaultKubeAPIBurst, with DefaultEventQPS and
	// DefaultEventBurst, split one budget of 100/200 an instance between
	// the volumes' client and the events' own one by their writes per
	// volume: a PV create, then its DELETE and its finalizer's patch, on
	// the volumes' client; one ProvisioningSucceeded event on the events'
	// (the library's Normal Provisioning is dropped, a removed directory
	// only logged). At 50/50 the volumes' client limited how fast PVs
	// were made and deleted in a burst (docs/benchmarks.md).
	DefaultKubeAPIQPS   = 80
	DefaultKubeAPIBurst = 160
	// DefaultEventQPS and DefaultEventBurst are the limits of the events'
	// own client.
	DefaultEventQPS         = 20
	DefaultEventBurst       = 40
	DefaultWorkers          = 8
	DefaultResyncPeriod     = 15 * time.Minute
	DefaultMetricsAddress   = ":8081"
	DefaultInstanceSelector = "app.kubernetes.io/name=hostpath-provisioner"
	DefaultManagerSelector  = "app.kubernetes.io/name=hostpath-manager"
	// DefaultManagerPort is the managers' HTTPS port.
	DefaultManagerPort = managerapi.ServingPort
	// DefaultManagerTokenFile is where the DaemonSet mounts the projected
	// service account token of audience managerapi.TokenAudience
	// (hostpath.dev/manager), meant for the managers only: the API server
	// refuses it, and the managers refuse the pod's own API token.
	DefaultManagerTokenFile = "/var/run/secrets/hostpath.dev/manager/token"
	// DefaultManagerTimeout bounds every manager call but deletes.
	DefaultManagerTimeout = managerapi.DefaultCallTimeout
	// DefaultManagerDeleteTimeout bounds a manager delete; it matches the
	// manager's default --write-timeout.
	DefaultManagerDeleteTimeout = managerapi.DefaultDeleteTimeout
	// DefaultFanoutWorkers bounds the manager calls in flight of one
	// multihost create or delete.
	DefaultFanoutWorkers = fanout.DefaultWorkers
	// DefaultFanoutNodeTimeout bounds one attempt of a multihost create on
	// one node.
	DefaultFanoutNodeTimeout = fanout.DefaultNodeTimeout
	// DefaultFanoutAttempts is how many times a node is tried within one
	// multihost create or delete.
	DefaultFanoutAttempts = fanout.DefaultAttempts
)

// Options are the provisioner's settings, from flags.
type Options struct {
	NodeName        string
	ProvisionerName string
	Kubeconfig      string
	KubeAPIQPS      float32
	KubeAPIBurst    int
	// EventQPS and EventBurst limit the client that sends the events, apart
	// from KubeAPIQPS and KubeAPIBurst.
	EventQPS       float32
	EventBurst     int
	Workers        int
	ResyncPeriod   time.Duration
	MetricsAddress string
	// Profiling serves Go's profiles on MetricsAddress (profiling.Flag).
	Profiling        bool
	Namespace        string
	InstanceSelector string
	ManagerNamespace string
	ManagerSelector  string
	ManagerPort      int
	ManagerURL       string
	// ManagerCAFile is the CA bundle (PEM) of an https ManagerURL.
	ManagerCAFile string
	// ManagerServerName is the name in the certificate of an https
	// ManagerURL; empty: managerapi.ServerName(NodeName).
	ManagerServerName string
	ManagerTokenFile  string
	// ManagerTimeout bounds every manager call but deletes.
	ManagerTimeout time.Duration
	// ManagerDeleteTimeout bounds a manager delete.
	ManagerDeleteTimeout time.Duration
	// NodeGoneGracePeriod, when positive, is how long a node-mode PV's Node
	// must have been deleted before the PV (reclaim policy Delete, not
	// Bound) is deleted too; 0 leaves such PVs alone.
	NodeGoneGracePeriod time.Duration
	// NodeGoneScanPeriod is how often the instance elected to scan lists
	// every PV for those of deleted Nodes that no instance watches.
	NodeGoneScanPeriod time.Duration
	// OrphanSweepPeriod is how often the node's pools are swept for
	// orphaned directories; 0 turns the sweeper off.
	OrphanSweepPeriod time.Duration
	// OrphanGracePeriod is how old an owner record must be before its
	// directory can count as orphaned.
	OrphanGracePeriod time.Duration
	// UsageInterval is how often the annotations hostpath.dev/size-used
	// and hostpath.dev/health of the node's PVs are refreshed; 0 turns it
	// off.
	UsageInterval time.Duration
	// UsageWarningThreshold is the usage, in percent of a volume's
	// enforced size, from which the volume gets a Warning VolumeUsageHigh
	// (0 to 100; 0 turns that warning off).
	UsageWarningThreshold int
	// CapacityInterval is how often this node's CSIStorageCapacity objects
	// are refreshed, and the shortest time between two writes of one; 0
	// turns publishing off (and deletes them).
	CapacityInterval time.Duration
	// FanoutWorkers bounds the manager calls in flight of one multihost
	// create or delete.
	FanoutWorkers int
	// FanoutNodeTimeout bounds one attempt of a multihost create on one
	// node (a delete's attempt is bounded by ManagerDeleteTimeout).
	FanoutNodeTimeout time.Duration
	// FanoutAttempts is how many times a node is tried within one
	// multihost create or delete.
	FanoutAttempts int
}

// NewOptions returns the defaults, with the environment fallbacks applied.
func NewOptions() *Options {
	return &Options{
		NodeName:         os.Getenv(EnvNodeName),
		ProvisionerName:  DefaultProvisionerName,
		KubeAPIQPS:       DefaultKubeAPIQPS,
		KubeAPIBurst:     DefaultKubeAPIBurst,
		EventQPS:         DefaultEventQPS,
		EventBurst:       DefaultEventBurst,
		Workers:          DefaultWorkers,
		ResyncPeriod:     DefaultResyncPeriod,
		MetricsAddress:   DefaultMetricsAddress,
		Namespace:        os.Getenv(EnvPodNamespace),
		InstanceSelector: DefaultInstanceSelector,
		ManagerNamespace: os.Getenv(EnvPodNamespace),
		ManagerSelector:  DefaultManagerSelector,
		ManagerPort:      DefaultManagerPort,
		ManagerTokenFile: DefaultManagerTokenFile,

		ManagerTimeout:        DefaultManagerTimeout,
		ManagerDeleteTimeout:  DefaultManagerDeleteTimeout,
		OrphanSweepPeriod:     reclaim.DefaultSweepPeriod,
		NodeGoneScanPeriod:    reclaim.DefaultGoneScanPeriod,
		OrphanGracePeriod:     reclaim.DefaultSweepGrace,
		UsageInterval:         usage.DefaultInterval,
		UsageWarningThreshold: usage.DefaultWarningThreshold,
		FanoutWorkers:         DefaultFanoutWorkers,
		FanoutNodeTimeout:     DefaultFanoutNodeTimeout,
		FanoutAttempts:        DefaultFanoutAttempts,
		CapacityInterval:      capacity.DefaultInterval,
	}
}

// AddFlags binds the options to fs (component.Main adds klog's flags).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, FlagNodeName, o.NodeName, "The node this instance runs on and provisions for. Defaults to the "+EnvNodeName+" environment variable; required.")
	fs.StringVar(&o.ProvisionerName, FlagProvisionerName, o.ProvisionerName, "The provisioner name that StorageClasses name in their provisioner field. The classes of "+hostpathv1.CapacityProvisionerName+" (capacity-aware: see --"+FlagCapacityInterval+") are always served too.")
	fs.StringVar(&o.Kubeconfig, FlagKubeconfig, o.Kubeconfig, "The kubeconfig file to reach the API server with. Defaults to the in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, FlagKubeAPIQPS, o.KubeAPIQPS, "The sustained queries per second to the API server.")
	fs.IntVar(&o.KubeAPIBurst, FlagKubeAPIBurst, o.KubeAPIBurst, "The burst of queries to the API server.")
	fs.Float32Var(&o.EventQPS, FlagEventQPS, o.EventQPS, "The sustained queries per second of the events, sent by a client of their own: they do not count against --"+FlagKubeAPIQPS+", so that volumes never wait behind events.")
	fs.IntVar(&o.EventBurst, FlagEventBurst, o.EventBurst, "The burst of queries of the events' own client (see --"+FlagEventQPS+").")
	fs.IntVar(&o.Workers, FlagWorkers, o.Workers, "The number of claim workers and of volume workers, each.")
	fs.DurationVar(&o.ResyncPeriod, FlagResyncPeriod, o.ResyncPeriod, "How often every claim and volume is looked at again even when nothing changed.")
	fs.StringVar(&o.MetricsAddress, FlagMetricsAddress, o.MetricsAddress, "The address that serves /healthz, /readyz and the Prometheus /metrics.")
	profiling.AddFlag(fs, &o.Profiling)
	fs.StringVar(&o.Namespace, FlagNamespace, o.Namespace, "The namespace of this instance and its peers. Defaults to the "+EnvPodNamespace+" environment variable; required.")
	fs.StringVar(&o.InstanceSelector, FlagInstanceSelector, o.InstanceSelector, "The label selector of the provisioner pods (this instance and its peers).")
	fs.StringVar(&o.ManagerNamespace, FlagManagerNamespace, o.ManagerNamespace, "The namespace of the manager pods and of the ConfigMap "+managerapi.CABundleConfigMap+", the CA bundle their certificates are verified with. Defaults to the "+EnvPodNamespace+" environment variable.")
	fs.StringVar(&o.ManagerSelector, FlagManagerSelector, o.ManagerSelector, "The label selector of the manager pods.")
	fs.IntVar(&o.ManagerPort, FlagManagerPort, o.ManagerPort, "The port the managers serve their API on, over HTTPS.")
	fs.StringVar(&o.ManagerURL, FlagManagerURL, o.ManagerURL, "A fixed manager URL, such as https://127.0.0.1:8443 or http://127.0.0.1:8080 (a test bench's manager without TLS), used for every node instead of finding the manager pod of the node (for one-node setups). Defaults to empty: find the pods.")
	fs.StringVar(&o.ManagerCAFile, FlagManagerCAFile, o.ManagerCAFile, "With an https --"+FlagManagerURL+" (required then): the PEM file of the CA certificates its certificate is verified with (key "+managerapi.CABundleKey+" of the ConfigMap "+managerapi.CABundleConfigMap+"), read once at start.")
	fs.StringVar(&o.ManagerServerName, FlagManagerServerName, o.ManagerServerName, "With an https --"+FlagManagerURL+": the DNS name its certificate must have. Defaults to that of the manager of --"+FlagNodeName+", "+managerapi.ServerName("<node>")+".")
	fs.StringVar(&o.ManagerTokenFile, FlagManagerTokenFile, o.ManagerTokenFile, "The file holding the bearer token sent to the managers, read again after a minute: a projected service account token of audience "+managerapi.TokenAudience+". Empty sends no token.")
	fs.DurationVar(&o.ManagerTimeout, FlagManagerTimeout, o.ManagerTimeout, "The time limit of each manager call but deletes.")
	fs.DurationVar(&o.NodeGoneGracePeriod, FlagNodeGoneGracePeriod, o.NodeGoneGracePeriod, "Off when 0 (the default). Otherwise, how long the Node object of a node-mode PV must have been deleted before the PV is deleted too, when its reclaim policy is Delete and it is not Bound (its directory went with the node); such PVs are marked "+hostpathv1.AnnotationNodeGoneSince+" with a NodeGone event at once, and unmarked if the Node comes back. Retain PVs stay, marked. A NotReady, cordoned or rebooting node keeps its Node object: its PVs are never touched.")
	fs.DurationVar(&o.NodeGoneScanPeriod, FlagNodeGoneScanPeriod, o.NodeGoneScanPeriod, "With --"+FlagNodeGoneGracePeriod+": how often one instance (elected) lists every PersistentVolume for the node-mode PVs of deleted Nodes that no instance watches (each instance watches only its own node's PVs); the nodes an instance left are checked every 15s besides, so this period matters only for PVs of a node that never ran an instance while the others did.")
	fs.DurationVar(&o.OrphanSweepPeriod, FlagOrphanSweepPeriod, o.OrphanSweepPeriod, "How often this instance sweeps its node's pools (and at once when this node's manager turns Ready): directories whose owner PV no longer exists go by the reclaim policy kept in their owner record (Delete: removed; Retain: kept; none: removed only when empty); 0 turns it off.")
	fs.DurationVar(&o.OrphanGracePeriod, FlagOrphanGracePeriod, o.OrphanGracePeriod, "How long after its owner record was written a directory may count as orphaned; keep it well above the time a PV takes to be saved.")
	fs.DurationVar(&o.UsageInterval, FlagUsageInterval, o.UsageInterval, "How often this instance refreshes the annotation "+hostpathv1.AnnotationSizeUsed+" on its node's PVs whose pool enforces their size (what the volume uses, rounded up to a whole MiB, written again when it moved by 1 MiB or more), looks at the health of their directories ("+hostpathv1.AnnotationHealth+", with an event at each change) and refreshes the volume metrics; 0 turns all of it off.")
	fs.IntVar(&o.UsageWarningThreshold, FlagUsageWarningThreshold, o.UsageWarningThreshold, "The usage, in percent of a volume's enforced size, from which the volume's claim and PV get a Warning VolumeUsageHigh (once; a Normal VolumeHealthy when the usage falls 5 points below it, or below half of a threshold under 10); 0 to 100, 0 turns the warning off. Only volumes whose pool enforces their size are looked at.")
	fs.DurationVar(&o.CapacityInterval, FlagCapacityInterval, o.CapacityInterval, "How often this instance refreshes the CSIStorageCapacity objects of its node, one per StorageClass of provisioner "+hostpathv1.CapacityProvisionerName+" that waits for the first consumer, through which the scheduler places pods only where the pool has room; an object is written when its capacity moved from or to 0 or by more than 1% of the pool's filesystem or 16 MiB, whichever is larger, and at most once per interval. 0 turns publishing off and deletes the node's objects: the scheduler then finds no room for those classes on the node.")
	fs.DurationVar(&o.ManagerDeleteTimeout, FlagManagerDeleteTimeout, o.ManagerDeleteTimeout, "The time limit of a manager delete, which removes a whole directory tree; keep it no shorter than the managers' --write-timeout.")
	fs.IntVar(&o.FanoutWorkers, FlagFanoutWorkers, o.FanoutWorkers, "The most manager calls in flight at once for one multihost volume's create or delete.")
	fs.DurationVar(&o.FanoutNodeTimeout, FlagFanoutNodeTimeout, o.FanoutNodeTimeout, "The time limit of one attempt to create a multihost volume's directory on one node (an attempt to delete it is bounded by --"+FlagManagerDeleteTimeout+").")
	fs.IntVar(&o.FanoutAttempts, FlagFanoutAttempts, o.FanoutAttempts, "How many times a multihost create or delete tries a node whose manager is unreachable, busy (429) or failing (5xx), with backoff from 500ms doubling, before the volume is retried as a whole.")
}

// Validate reports every option that cannot work.
func (o *Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, fmt.Errorf("--%s (or %s) is required", FlagNodeName, EnvNodeName))
	}
	if o.ProvisionerName == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", FlagProvisionerName))
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagKubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", FlagKubeAPIBurst))
	}
	if o.EventQPS <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagEventQPS))
	}
	if o.EventBurst < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", FlagEventBurst))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", FlagWorkers))
	}
	if o.ResyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagResyncPeriod))
	}
	if _, _, err := net.SplitHostPort(o.MetricsAddress); err != nil {
		errs = append(errs, fmt.Errorf("--%s: %w", FlagMetricsAddress, err))
	}
	if o.Namespace == "" {
		errs = append(errs, fmt.Errorf("--%s (or %s) is required", FlagNamespace, EnvPodNamespace))
	}
	if err := validateSelector(FlagInstanceSelector, o.InstanceSelector); err != nil {
		errs = append(errs, err)
	}
	if o.ManagerTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagManagerTimeout))
	}
	if o.ManagerDeleteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagManagerDeleteTimeout))
	}
	if o.NodeGoneScanPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagNodeGoneScanPeriod))
	}
	if o.NodeGoneGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--%s must not be negative", FlagNodeGoneGracePeriod))
	}
	if o.OrphanSweepPeriod < 0 {
		errs = append(errs, fmt.Errorf("--%s must not be negative", FlagOrphanSweepPeriod))
	}
	if o.OrphanGracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagOrphanGracePeriod))
	}
	if o.UsageInterval < 0 {
		errs = append(errs, fmt.Errorf("--%s must not be negative", FlagUsageInterval))
	}
	if o.UsageWarningThreshold < 0 || o.UsageWarningThreshold > 100 {
		errs = append(errs, fmt.Errorf("--%s must be a percentage from 0 to 100 (0 turns the warning off)", FlagUsageWarningThreshold))
	}
	if o.CapacityInterval < 0 {
		errs = append(errs, fmt.Errorf("--%s must not be negative", FlagCapacityInterval))
	}
	if o.FanoutWorkers < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", FlagFanoutWorkers))
	}
	if o.FanoutNodeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagFanoutNodeTimeout))
	}
	if o.FanoutAttempts < 1 {
		errs = append(errs, fmt.Errorf("--%s must be at least 1", FlagFanoutAttempts))
	}
	return errors.Join(append(errs, o.validateManagers()...)...)
}

// validateManagers reports the manager options that cannot work: those of
// discovery, or those of a fixed --manager-url.
func (o *Options) validateManagers() []error {
	var errs []error
	if o.ManagerURL == "" {
		if o.ManagerNamespace == "" {
			errs = append(errs, fmt.Errorf("--%s (or %s) is required unless --%s is set", FlagManagerNamespace, EnvPodNamespace, FlagManagerURL))
		}
		if err := validateSelector(FlagManagerSelector, o.ManagerSelector); err != nil {
			errs = append(errs, err)
		}
		if o.ManagerPort < 1 || o.ManagerPort > 65535 {
			errs = append(errs, fmt.Errorf("--%s must be a port from 1 to 65535", FlagManagerPort))
		}
	}
	https := isHTTPS(o.ManagerURL)
	if o.ManagerURL != "" {
		if _, err := managerapi.New(o.ManagerURL); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", FlagManagerURL, err))
		}
		if https && o.ManagerCAFile == "" {
			errs = append(errs, fmt.Errorf("--%s is required with an https --%s", FlagManagerCAFile, FlagManagerURL))
		}
	}
	for _, f := range []struct{ name, value string }{{FlagManagerCAFile, o.ManagerCAFile}, {FlagManagerServerName, o.ManagerServerName}} {
		if f.value != "" && !https {
			errs = append(errs, fmt.Errorf("--%s is only for an https --%s (discovered managers are verified with the ConfigMap %s)", f.name, FlagManagerURL, managerapi.CABundleConfigMap))
		}
	}
	return errs
}

// isHTTPS reports whether the manager URL u is https (as managerapi.New reads
// it: any case).
func isHTTPS(u string) bool {
	parsed, err := url.Parse(u)
	return err == nil && parsed.Scheme == "https"
}

// validateSelector checks that the flag's value is a non-empty label selector.
func validateSelector(flagName, value string) error {
	if value == "" {
		return fmt.Errorf("--%s must not be empty", flagName)
	}
	if _, err := labels.Parse(value); err != nil {
		return fmt.Errorf("--%s: %w", flagName, err)
	}
	return nil
}
