// Package app is the host definer program, in the shape of the other two:
// Options (its flags, and Validate); Complete, which builds a Config (the
// clients, informers and controllers); and Config.Run, which serves
// /healthz, /readyz and /metrics, and while this replica holds the leader
// Lease runs the HostDefinition controller and the controllers of the
// managers' serving certificates (package csr: approve, sign, keep the CA
// and its bundle). The managers are called over HTTPS, trusting only the
// CA bundle of the ConfigMap managerapi.CABundleConfigMap.
package app

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/profiling"
	"hostpath.dev/hostdefiner/internal/csr"
)

// Flag names.
const (
	FlagKubeconfig          = "kubeconfig"
	FlagKubeAPIQPS          = "kube-api-qps"
	FlagKubeAPIBurst        = "kube-api-burst"
	FlagHealthAddress       = "health-address"
	FlagNamespace           = "namespace"
	FlagProvisionerName     = "provisioner-name"
	FlagManagerDaemonSet    = "manager-daemonset"
	FlagManagerSelector     = "manager-selector"
	FlagProvisionerSelector = "provisioner-selector"
	FlagManagerPort         = "manager-port"
	FlagManagerTokenFile    = "manager-token-file"
	FlagManagerTimeout      = "manager-timeout"
	FlagManagerSA           = "manager-service-account"
	FlagMaxCertLifetime     = "max-certificate-lifetime"
	FlagCAOverlap           = "ca-overlap"
	FlagMinFreeBytes        = "min-free-bytes"
	FlagMaxTries            = "max-tries"
	FlagInitialBackoff      = "initial-backoff"
	FlagMaxBackoff          = "max-backoff"
	FlagAllowDelete         = "allow-delete"
	FlagReverifyPeriod      = "reverify-period"
	FlagBackfillWorkers     = "backfill-workers"
	FlagWorkers             = "workers"
	FlagResyncPeriod        = "resync-period"
	FlagLeaderElect         = "leader-elect"
	FlagLeaseName           = "leader-elect-lease-name"
	FlagLeaseDuration       = "leader-elect-lease-duration"
	FlagLeaseRenewDeadline  = "leader-elect-renew-deadline"
	FlagLeaseRetryPeriod    = "leader-elect-retry-period"
	EnvPodNamespace         = "POD_NAMESPACE"
	EnvPodName              = "POD_NAME"
	DefaultManagerTokenFile = "/var/run/secrets/hostpath.dev/manager/token"
)

// Options holds the host definer's settings; it is the component.Program
// that main runs.
type Options struct {
	Kubeconfig    string
	KubeAPIQPS    float32
	KubeAPIBurst  int
	HealthAddress string
	// Profiling serves Go's profiles on HealthAddress (profiling.Flag).
	Profiling        bool
	Namespace        string
	ProvisionerName  string
	ManagerDaemonSet string
	ManagerSelector  string
	// ProvisionerSelector selects the provisioner pods in Namespace: the
	// nodes they run on are listed as served in the ConfigMap of the
	// classes.
	ProvisionerSelector string
	ManagerPort         int
	ManagerTokenFile    string
	ManagerTimeout      time.Duration
	MinFreeBytes        int64
	MaxTries            int32
	InitialBackoff      time.Duration
	MaxBackoff          time.Duration
	AllowDelete         bool
	ReverifyPeriod      time.Duration
	BackfillWorkers     int
	Workers             int
	ResyncPeriod        time.Duration
	LeaderElect         bool
	LeaseName           string
	LeaseDuration       time.Duration
	RenewDeadline       time.Duration
	RetryPeriod         time.Duration

	// ManagerServiceAccount is the managers' service account, in
	// Namespace.
	ManagerServiceAccount string
	// MaxCertificateLifetime caps the managers' serving certificates.
	MaxCertificateLifetime time.Duration
	// CAOverlap is how long an old CA stays trusted after a rotation.
	CAOverlap time.Duration

	// managerSelector is ManagerSelector parsed by Validate, and
	// provisionerSelector ProvisionerSelector.
	managerSelector     labels.Selector
	provisionerSelector labels.Selector
}

var _ component.Program = &Options{}

// NewOptions returns Options with their defaults.
func NewOptions() *Options {
	return &Options{
		KubeAPIQPS: 50, KubeAPIBurst: 100,
		HealthAddress:       ":8081",
		Namespace:           os.Getenv(EnvPodNamespace),
		ProvisionerName:     hostpathv1.DefaultProvisionerName,
		ManagerDaemonSet:    "hostpath-manager",
		ManagerSelector:     "app.kubernetes.io/name=hostpath-manager",
		ProvisionerSelector: "app.kubernetes.io/name=hostpath-provisioner",
		ManagerPort:         managerapi.ServingPort,
		ManagerTokenFile:    DefaultManagerTokenFile,
		ManagerTimeout:      managerapi.DefaultCallTimeout,
		MinFreeBytes:        0,
		MaxTries:            5,
		InitialBackoff:      2 * time.Second,
		MaxBackoff:          5 * time.Minute,
		AllowDelete:         true,
		ReverifyPeriod:      10 * time.Minute,
		BackfillWorkers:     8,
		Workers:             2,
		ResyncPeriod:        15 * time.Minute,
		LeaderElect:         true,
		LeaseName:           "hostpath-hostdefiner",
		LeaseDuration:       15 * time.Second,
		RenewDeadline:       10 * time.Second,
		RetryPeriod:         2 * time.Second,

		ManagerServiceAccount:  "hostpath-manager",
		MaxCertificateLifetime: csr.DefaultLifetime,
		CAOverlap:              48 * time.Hour,
	}
}

// AddFlags binds the options to fs (component.Main adds klog's flags).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, FlagKubeconfig, o.Kubeconfig, "The kubeconfig file to reach the API server with. Defaults to the in-cluster configuration.")
	fs.Float32Var(&o.KubeAPIQPS, FlagKubeAPIQPS, o.KubeAPIQPS, "The sustained queries per second to the API server.")
	fs.IntVar(&o.KubeAPIBurst, FlagKubeAPIBurst, o.KubeAPIBurst, "The burst of queries to the API server.")
	fs.StringVar(&o.HealthAddress, FlagHealthAddress, o.HealthAddress, "The address (host:port) that serves /healthz, /readyz and the Prometheus /metrics.")
	profiling.AddFlag(fs, &o.Profiling)
	fs.StringVar(&o.Namespace, FlagNamespace, o.Namespace, "The namespace of the manager pods and DaemonSet and of the leader Lease. Defaults to the "+EnvPodNamespace+" environment variable; required.")
	fs.StringVar(&o.ProvisionerName, FlagProvisionerName, o.ProvisionerName, "The provisioner name of the StorageClasses whose pools get definitions, and of the multihost PersistentVolumes that are backfilled; those of "+hostpathv1.CapacityProvisionerName+" (capacity-aware classes) are always served too.")
	fs.StringVar(&o.ManagerDaemonSet, FlagManagerDaemonSet, o.ManagerDaemonSet, "The manager DaemonSet's name: a node is defined where it runs a pod, and leaves when it would no longer run one.")
	fs.StringVar(&o.ManagerSelector, FlagManagerSelector, o.ManagerSelector, "The label selector of the manager pods.")
	fs.StringVar(&o.ProvisionerSelector, FlagProvisionerSelector, o.ProvisionerSelector, "The label selector of the provisioner pods, in --"+FlagNamespace+
		": the nodes they run on are listed in the ConfigMap "+hostpathv1.ClassesConfigMap+", so that the claim-labelling policy labels a pending claim with its node only when an instance runs there.")
	fs.IntVar(&o.ManagerPort, FlagManagerPort, o.ManagerPort, "The port the managers serve their API on, in HTTPS.")
	fs.StringVar(&o.ManagerTokenFile, FlagManagerTokenFile, o.ManagerTokenFile, "The file holding the bearer token sent to the managers, read again after a minute: a projected service account token of audience "+managerapi.TokenAudience+". Empty sends no token.")
	fs.DurationVar(&o.ManagerTimeout, FlagManagerTimeout, o.ManagerTimeout, "The time limit of each manager call.")
	fs.StringVar(&o.ManagerServiceAccount, FlagManagerSA, o.ManagerServiceAccount, "The managers' service account, in --"+FlagNamespace+
		" (a pod's service account is in its namespace): only CertificateSigningRequests it made from a live manager pod, for that pod's node, are approved.")
	fs.DurationVar(&o.MaxCertificateLifetime, FlagMaxCertLifetime, o.MaxCertificateLifetime, "The longest lifetime of a manager's serving certificate (a CSR's spec.expirationSeconds, 24h when unset, is capped by it).")
	fs.DurationVar(&o.CAOverlap, FlagCAOverlap, o.CAOverlap, "How long the old CA stays trusted after a rotation of the managers' CA (annotation "+csr.RotateAnnotation+
		" on the Secret "+managerapi.CASecret+"); more than --"+FlagMaxCertLifetime+", so that every manager renews under the new CA meanwhile.")
	fs.Int64Var(&o.MinFreeBytes, FlagMinFreeBytes, o.MinFreeBytes, "The free bytes a pool needs on a node for its definition to be Ready; 0 requires none.")
	fs.Int32Var(&o.MaxTries, FlagMaxTries, o.MaxTries, "How many tries a round of define (or undefine) makes before the definition goes to Error.")
	fs.DurationVar(&o.InitialBackoff, FlagInitialBackoff, o.InitialBackoff, "The wait after the first failed try; it doubles after every further one.")
	fs.DurationVar(&o.MaxBackoff, FlagMaxBackoff, o.MaxBackoff, "The longest wait between two tries.")
	fs.BoolVar(&o.AllowDelete, FlagAllowDelete, o.AllowDelete, "Remove the definitions of a node that leaves (its Node is deleted, or the manager DaemonSet no longer runs there). false keeps them all; the label "+hostpathv1.AvoidDeletionLabel+"=true keeps one node's.")
	fs.DurationVar(&o.ReverifyPeriod, FlagReverifyPeriod, o.ReverifyPeriod, "How often a Ready definition is verified again (identity, pool, free space, multihost directories); 0 only on changes.")
	fs.IntVar(&o.BackfillWorkers, FlagBackfillWorkers, o.BackfillWorkers, "The most multihost directories one try creates at once on a node.")
	fs.IntVar(&o.Workers, FlagWorkers, o.Workers, "The number of (node, pool) keys synced at once.")
	fs.DurationVar(&o.ResyncPeriod, FlagResyncPeriod, o.ResyncPeriod, "How often the informers replay every object even when nothing changed.")
	fs.BoolVar(&o.LeaderElect, FlagLeaderElect, o.LeaderElect, "Run the controller only while this replica holds the leader Lease (run 2 replicas for fail-over). false runs it at once: for a single replica only.")
	fs.StringVar(&o.LeaseName, FlagLeaseName, o.LeaseName, "The name of the leader Lease in --"+FlagNamespace+".")
	fs.DurationVar(&o.LeaseDuration, FlagLeaseDuration, o.LeaseDuration, "How long a standby waits after the last renewal before it takes the Lease over.")
	fs.DurationVar(&o.RenewDeadline, FlagLeaseRenewDeadline, o.RenewDeadline, "How long the leader keeps trying to renew before it gives the lead up.")
	fs.DurationVar(&o.RetryPeriod, FlagLeaseRetryPeriod, o.RetryPeriod, "How often leader election actions are tried.")
}

// Validate reports every option that cannot work.
func (o *Options) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(o.HealthAddress); err != nil {
		errs = append(errs, fmt.Errorf("--%s %q: %w", FlagHealthAddress, o.HealthAddress, err))
	}
	if o.Namespace == "" {
		errs = append(errs, fmt.Errorf("--%s (or %s) is required", FlagNamespace, EnvPodNamespace))
	}
	for flag, v := range map[string]string{FlagProvisionerName: o.ProvisionerName, FlagManagerDaemonSet: o.ManagerDaemonSet, FlagLeaseName: o.LeaseName} {
		if v == "" {
			errs = append(errs, fmt.Errorf("--%s must not be empty", flag))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(o.ManagerServiceAccount); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--%s %q: want a service account name (in --%s): %s", FlagManagerSA, o.ManagerServiceAccount, FlagNamespace, strings.Join(msgs, "; ")))
	}
	sel, err := labels.Parse(o.ManagerSelector)
	if err != nil || sel.Empty() {
		errs = append(errs, fmt.Errorf("--%s %q: want a non-empty label selector: %v", FlagManagerSelector, o.ManagerSelector, err))
	}
	o.managerSelector = sel
	sel, err = labels.Parse(o.ProvisionerSelector)
	if err != nil || sel.Empty() {
		errs = append(errs, fmt.Errorf("--%s %q: want a non-empty label selector: %v", FlagProvisionerSelector, o.ProvisionerSelector, err))
	}
	o.provisionerSelector = sel
	errs = append(errs, o.validateNumbers()...)
	return errors.Join(errs...)
}

// validateNumbers checks the numeric options.
func (o *Options) validateNumbers() []error {
	var errs []error
	positive := map[string]bool{
		FlagKubeAPIQPS: o.KubeAPIQPS > 0, FlagKubeAPIBurst: o.KubeAPIBurst > 0, FlagManagerPort: o.ManagerPort > 0 && o.ManagerPort < 65536,
		FlagManagerTimeout: o.ManagerTimeout > 0, FlagMaxTries: o.MaxTries > 0, FlagInitialBackoff: o.InitialBackoff > 0,
		FlagBackfillWorkers: o.BackfillWorkers > 0, FlagWorkers: o.Workers > 0,
		FlagLeaseDuration: o.LeaseDuration > 0, FlagLeaseRenewDeadline: o.RenewDeadline > 0, FlagLeaseRetryPeriod: o.RetryPeriod > 0,
		FlagMaxCertLifetime: o.MaxCertificateLifetime > 0,
	}
	for flag, ok := range positive {
		if !ok {
			errs = append(errs, fmt.Errorf("--%s must be positive", flag))
		}
	}
	if o.MaxBackoff < o.InitialBackoff {
		errs = append(errs, fmt.Errorf("--%s must be at least --%s", FlagMaxBackoff, FlagInitialBackoff))
	}
	if o.MinFreeBytes < 0 || o.ReverifyPeriod < 0 || o.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--%s, --%s and --%s must not be negative", FlagMinFreeBytes, FlagReverifyPeriod, FlagResyncPeriod))
	}
	if o.CAOverlap <= o.MaxCertificateLifetime {
		errs = append(errs, fmt.Errorf("--%s must exceed --%s: every manager must renew under the new CA while the old one is trusted", FlagCAOverlap, FlagMaxCertLifetime))
	}
	if o.LeaderElect && !(o.LeaseDuration > o.RenewDeadline && o.RenewDeadline > o.RetryPeriod) {
		errs = append(errs, fmt.Errorf("want --%s > --%s > --%s", FlagLeaseDuration, FlagLeaseRenewDeadline, FlagLeaseRetryPeriod))
	}
	return errs
}
