package app

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/certs"
	"hostpath.dev/manager/internal/disk"
	"hostpath.dev/manager/internal/identity"
	"hostpath.dev/manager/internal/selinux"
	"hostpath.dev/manager/internal/server"
)

// Options are what component.Main runs.
var _ component.Program = &Options{}

// Flag names and the environment variables some of them fall back to.
const (
	FlagNodeName               = "node-name"
	EnvNodeName                = "NODE_NAME"
	FlagNamespace              = "namespace"
	EnvPodNamespace            = "POD_NAMESPACE"
	FlagPool                   = "pool"
	FlagPoolRoot               = "pool-root"
	FlagPoolsConfig            = "pools-config"
	FlagPoolOvercommit         = "pool-overcommit"
	FlagStateDir               = "state-dir"
	FlagMachineIDFile          = "machine-id-file"
	FlagBootIDFile             = "boot-id-file"
	FlagListenAddress          = "listen-address"
	FlagHealthAddress          = "health-address"
	FlagTLSDir                 = "tls-dir"
	FlagCertificateLifetime    = "certificate-lifetime"
	FlagMaxBodyBytes           = "max-body-bytes"
	FlagCloneConcurrency       = "clone-concurrency"
	FlagReadHeaderTimeout      = "read-header-timeout"
	FlagReadTimeout            = "read-timeout"
	FlagWriteTimeout           = "write-timeout"
	FlagIdleTimeout            = "idle-timeout"
	FlagShutdownTimeout        = "shutdown-timeout"
	FlagUsageMetricsInterval   = "usage-metrics-interval"
	FlagTokenCacheTTL          = "token-cache-ttl"
	FlagTokenRejectedCacheTTL  = "token-rejected-cache-ttl"
	FlagAllowedCacheTTL        = "authz-allowed-cache-ttl"
	FlagDeniedCacheTTL         = "authz-denied-cache-ttl"
	FlagPodCacheTTL            = "pod-cache-ttl"
	FlagAuthCacheSize          = "auth-cache-size"
	FlagTokenAudience          = "token-audience"
	FlagMaxInFlightPerAddress  = "max-in-flight-per-address"
	FlagReviewsPerAddressQPS   = "reviews-per-address-qps"
	FlagReviewsPerAddressBurst = "reviews-per-address-burst"
	FlagReviewsPerUserQPS      = "reviews-per-user-qps"
	FlagReviewsPerUserBurst    = "reviews-per-user-burst"
	FlagReviewsStrangersQPS    = "reviews-strangers-qps"
	FlagReviewsStrangersBurst  = "reviews-strangers-burst"
	// The names of FlagReviewsPerAddressQPS and FlagReviewsPerAddressBurst
	// before they counted SubjectAccessReviews too; deprecated.
	flagTokenReviewsPerAddressQPS   = "token-reviews-per-address-qps"
	flagTokenReviewsPerAddressBurst = "token-reviews-per-address-burst"
	FlagInsecureSkipAuth            = "insecure-skip-auth"
	FlagKubeconfig                  = "kubeconfig"
	FlagKubeAPIQPS                  = "kube-api-qps"
	FlagKubeAPIBurst                = "kube-api-burst"
	FlagSELinux                     = "selinux"
	FlagSELinuxContext              = "selinux-context"
)

// DefaultPool is the --pool default.
const DefaultPool = "default=/var/hpvolumes"

// Options holds the manager's settings, as the flags give them.
type Options struct {
	// NodeName is the node the manager runs on.
	NodeName string
	// Namespace is the product's namespace, where the CA bundle ConfigMap
	// managerapi.CABundleConfigMap is; empty for no check of the serving
	// certificate against it.
	Namespace string
	// Pools are NAME=PATH pairs.
	Pools []string
	// PoolRoot is the directory of the pools named on the fly (PUT
	// /v1/pools/NAME of a name Pools lacks makes PoolRoot/NAME); empty for
	// none.
	PoolRoot string
	// PoolsConfig is the directory of the mounted ConfigMap hostpath-pools
	// (see readPoolsConfig); when set, it alone says the pools and the
	// pool root, and Pools and PoolRoot are ignored. The API server's
	// admission policy reads the same ConfigMap, so a PV can only name a
	// directory below a pool a manager serves.
	PoolsConfig string
	// PoolOvercommit are NAME=RATIO pairs: how many times its capacity a
	// pool may promise to volumes (1 for a pool not named).
	PoolOvercommit []string
	// StateDir holds the host ID, and by default the TLS directory.
	StateDir string
	// MachineIDFile and BootIDFile are read for /v1/host.
	MachineIDFile, BootIDFile string
	// ListenAddress is where /v1 is served (host:port), over HTTPS
	// (plain HTTP with InsecureSkipAuth).
	ListenAddress string
	// HealthAddress is where /healthz, /readyz and /metrics are served in
	// plain HTTP (host:port).
	HealthAddress string
	// TLSDir keeps the serving certificate and its key; empty means
	// StateDir/tls.
	TLSDir string
	// CertificateLifetime is the validity the serving certificate's CSR
	// asks for.
	CertificateLifetime time.Duration
	// MaxBodyBytes limits request bodies.
	MaxBodyBytes int64
	// CloneConcurrency is how many clones copy at once.
	CloneConcurrency int
	// HTTP server timeouts.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown.
	ShutdownTimeout time.Duration
	// UsageMetricsInterval is how often the pool and volume figures that
	// /metrics exports are read from the disk.
	UsageMetricsInterval time.Duration
	// Auth tunes the TokenReview and SubjectAccessReview caches and sets
	// the token audience.
	Auth auth.Options
	// Limits bounds what callers may cost: per address, per user and for
	// strangers together (OwnNamespace is set from Namespace).
	Limits review.LimitOptions
	// InsecureSkipAuth lets every call through unauthenticated.
	InsecureSkipAuth bool
	// Kubeconfig is the path of a kubeconfig; empty means in-cluster.
	Kubeconfig string
	// KubeAPIQPS and KubeAPIBurst limit calls to the API server.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// SELinux is auto, on or off: whether new volume directories and
	// prepared pool directories get SELinuxContext (auto: when SELinux is
	// enabled on the host).
	SELinux string
	// SELinuxContext is the context they get.
	SELinuxContext string

	// pools are the parsed Pools, set by Validate.
	pools map[string]string
	// overcommit is PoolOvercommit parsed.
	overcommit map[string]float64
	// selinuxFS is where --selinux=auto looks for selinuxfs.
	selinuxFS string
	// kube, when set (by tests), is the API client instead of one from
	// Kubeconfig.
	kube *kubeAPI
}

// NewOptions returns Options with their defaults; the node name defaults to
// $NODE_NAME, the namespace to $POD_NAMESPACE.
func NewOptions() *Options {
	return &Options{
		NodeName:             os.Getenv(EnvNodeName),
		Namespace:            os.Getenv(EnvPodNamespace),
		Pools:                []string{DefaultPool},
		StateDir:             "/var/lib/hostpath",
		MachineIDFile:        identity.DefaultMachineIDFile,
		BootIDFile:           identity.DefaultBootIDFile,
		ListenAddress:        fmt.Sprintf(":%d", managerapi.ServingPort),
		HealthAddress:        fmt.Sprintf(":%d", managerapi.HealthPort),
		CertificateLifetime:  certs.DefaultLifetime,
		MaxBodyBytes:         server.DefaultMaxBodyBytes,
		CloneConcurrency:     disk.DefaultCloneConcurrency,
		ReadHeaderTimeout:    10 * time.Second,
		ReadTimeout:          30 * time.Second,
		WriteTimeout:         10 * time.Minute,
		IdleTimeout:          2 * time.Minute,
		ShutdownTimeout:      30 * time.Second,
		UsageMetricsInterval: server.DefaultUsageInterval,
		Auth:                 auth.DefaultOptions(),
		Limits:               review.DefaultLimitOptions(),
		KubeAPIQPS:           20,
		KubeAPIBurst:         40,
		SELinux:              string(selinux.ModeAuto),
		SELinuxContext:       selinux.DefaultContext,
		selinuxFS:            selinux.DefaultFS,
	}
}

// AddFlags binds the options to fs; component.Main adds klog's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, FlagNodeName, o.NodeName, "Name of the Kubernetes node the manager runs on, reported by /v1/host. Defaults to $"+EnvNodeName+"; required.")
	fs.StringVar(&o.Namespace, FlagNamespace, o.Namespace, "Namespace of the CA bundle ConfigMap "+managerapi.CABundleConfigMap+" (the product's): a serving certificate that no longer chains to that bundle is renewed at once. Defaults to $"+EnvPodNamespace+"; empty for no such check.")
	fs.StringArrayVar(&o.Pools, FlagPool, o.Pools, "Storage pool as NAME=PATH, with NAME a DNS label and PATH an absolute directory on the host; repeat the flag for more pools (giving it replaces the default).")
	fs.StringArrayVar(&o.PoolOvercommit, FlagPoolOvercommit, o.PoolOvercommit, "How many times its capacity a pool may promise to volumes, as NAME=RATIO (a pool configured by --"+FlagPool+" or named on the fly); repeat for more pools. Pools not named have ratio 1: the sizes of their volumes never add up to more than the filesystem's capacity.")
	fs.StringVar(&o.PoolsConfig, FlagPoolsConfig, o.PoolsConfig, "Directory of the mounted ConfigMap hostpath-pools: its key pool.NAME holds the path of pool NAME, its key poolRoot the --"+FlagPoolRoot+". When set, it is the only source of the pools (--"+FlagPool+" and --"+FlagPoolRoot+" are ignored), the one the API server's admission policy reads too; empty to take --"+FlagPool+" and --"+FlagPoolRoot+".")
	fs.StringVar(&o.PoolRoot, FlagPoolRoot, o.PoolRoot, "Absolute directory on the host for pools named on the fly: PUT /v1/pools/NAME of a pool that --"+FlagPool+" does not name creates PATH/NAME, served as a pool from then on. It must not overlap a --"+FlagPool+" path; empty for none.")
	fs.StringVar(&o.StateDir, FlagStateDir, o.StateDir, "Directory that keeps the host ID (and by default the TLS directory), created if missing.")
	fs.StringVar(&o.MachineIDFile, FlagMachineIDFile, o.MachineIDFile, "File holding the machine ID reported by /v1/host; empty to report none.")
	fs.StringVar(&o.BootIDFile, FlagBootIDFile, o.BootIDFile, "File holding the kernel's boot ID reported by /v1/host.")
	fs.StringVar(&o.ListenAddress, FlagListenAddress, o.ListenAddress, "Address (host:port) to serve the /v1 API on, over HTTPS once the manager has its serving certificate (plain HTTP with --"+FlagInsecureSkipAuth+").")
	fs.StringVar(&o.HealthAddress, FlagHealthAddress, o.HealthAddress, "Address (host:port) to serve /healthz, /readyz (ready once /v1 is served) and /metrics on, in plain HTTP; it never serves /v1.")
	fs.StringVar(&o.TLSDir, FlagTLSDir, o.TLSDir, "Directory (mode 0700, created if missing) that keeps the serving certificate and its key across restarts; empty means the tls directory in --"+FlagStateDir+".")
	fs.DurationVar(&o.CertificateLifetime, FlagCertificateLifetime, o.CertificateLifetime, "Validity the serving certificate's CertificateSigningRequest asks for (expirationSeconds, at least 10m); it is renewed at 70% of its life.")
	fs.Int64Var(&o.MaxBodyBytes, FlagMaxBodyBytes, o.MaxBodyBytes, "Largest request body accepted, in bytes; larger ones get 413.")
	fs.IntVar(&o.CloneConcurrency, FlagCloneConcurrency, o.CloneConcurrency, "How many volume clones copy at once; more wait in line (a btrfs snapshot takes a slot too, briefly).")
	fs.DurationVar(&o.ReadHeaderTimeout, FlagReadHeaderTimeout, o.ReadHeaderTimeout, "Time allowed to read a request's headers.")
	fs.DurationVar(&o.ReadTimeout, FlagReadTimeout, o.ReadTimeout, "Time allowed to read a whole request.")
	fs.DurationVar(&o.WriteTimeout, FlagWriteTimeout, o.WriteTimeout, "Time allowed to serve a request, removal of a large volume included.")
	fs.DurationVar(&o.IdleTimeout, FlagIdleTimeout, o.IdleTimeout, "Time an idle keep-alive connection is kept open.")
	fs.DurationVar(&o.ShutdownTimeout, FlagShutdownTimeout, o.ShutdownTimeout, "Time allowed for requests in flight to finish at shutdown.")
	fs.DurationVar(&o.UsageMetricsInterval, FlagUsageMetricsInterval, o.UsageMetricsInterval, "How often the pool and volume size figures that /metrics exports are read from the disk (a listing of each pool and a quota read per volume whose size is enforced); a scrape serves the last figures read, and hostpath_manager_usage_refresh_timestamp_seconds tells when that was. Must be positive.")
	fs.DurationVar(&o.Auth.AuthenticatedTTL, FlagTokenCacheTTL, o.Auth.AuthenticatedTTL, "How long a token accepted by TokenReview is remembered.")
	fs.DurationVar(&o.Auth.UnauthenticatedTTL, FlagTokenRejectedCacheTTL, o.Auth.UnauthenticatedTTL, "How long a token rejected by TokenReview is remembered.")
	fs.DurationVar(&o.Auth.AllowedTTL, FlagAllowedCacheTTL, o.Auth.AllowedTTL, "How long a call allowed by SubjectAccessReview is remembered.")
	fs.DurationVar(&o.Auth.DeniedTTL, FlagDeniedCacheTTL, o.Auth.DeniedTTL, "How long a call denied by SubjectAccessReview is remembered.")
	fs.DurationVar(&o.Auth.PodTTL, FlagPodCacheTTL, o.Auth.PodTTL, "How long what the manager found of the pod a writing caller's token is bound to (live, or gone) is remembered.")
	fs.IntVar(&o.Auth.CacheSize, FlagAuthCacheSize, o.Auth.CacheSize, "Most entries kept in each of the five caches: accepted tokens, rejected tokens, allowed calls, denied calls, callers' pods.")
	fs.StringVar(&o.Auth.Audience, FlagTokenAudience, o.Auth.Audience, "Audience a bearer token must be issued for; tokens for other audiences, the API server's included, are refused.")
	fs.IntVar(&o.Limits.MaxInFlight, FlagMaxInFlightPerAddress, o.Limits.MaxInFlight, "Most requests one client address may have in flight, /v1 and /metrics together; more get 429.")
	fs.Float64Var(&o.Limits.PerAddressQPS, FlagReviewsPerAddressQPS, o.Limits.PerAddressQPS, "TokenReviews and SubjectAccessReviews per second one client address may cause (calls the caches do not answer); more get 429.")
	fs.IntVar(&o.Limits.PerAddressBurst, FlagReviewsPerAddressBurst, o.Limits.PerAddressBurst, "TokenReviews and SubjectAccessReviews one client address may cause at once.")
	fs.Float64Var(&o.Limits.PerAddressQPS, flagTokenReviewsPerAddressQPS, o.Limits.PerAddressQPS, "Old name of --"+FlagReviewsPerAddressQPS+".")
	fs.IntVar(&o.Limits.PerAddressBurst, flagTokenReviewsPerAddressBurst, o.Limits.PerAddressBurst, "Old name of --"+FlagReviewsPerAddressBurst+".")
	_ = fs.MarkDeprecated(flagTokenReviewsPerAddressQPS, "use --"+FlagReviewsPerAddressQPS+", which counts SubjectAccessReviews too")
	_ = fs.MarkDeprecated(flagTokenReviewsPerAddressBurst, "use --"+FlagReviewsPerAddressBurst+", which counts SubjectAccessReviews too")
	fs.Float64Var(&o.Limits.PerUserQPS, FlagReviewsPerUserQPS, o.Limits.PerUserQPS, "SubjectAccessReviews per second one user from outside --"+FlagNamespace+" may cause, from any address; more get 429.")
	fs.IntVar(&o.Limits.PerUserBurst, FlagReviewsPerUserBurst, o.Limits.PerUserBurst, "SubjectAccessReviews one user from outside --"+FlagNamespace+" may cause at once.")
	fs.Float64Var(&o.Limits.StrangersQPS, FlagReviewsStrangersQPS, o.Limits.StrangersQPS, "Reviews per second all callers from outside --"+FlagNamespace+" together may cause; more get 429. Must be below --"+FlagKubeAPIQPS+": the rest is reserved for the service accounts of --"+FlagNamespace+" (the provisioner, the host definer, the orphans report, the metrics scraper).")
	fs.IntVar(&o.Limits.StrangersBurst, FlagReviewsStrangersBurst, o.Limits.StrangersBurst, "Reviews all callers from outside --"+FlagNamespace+" together may cause at once; must be below --"+FlagKubeAPIBurst+".")
	fs.BoolVar(&o.InsecureSkipAuth, FlagInsecureSkipAuth, o.InsecureSkipAuth, "Serve /v1 to anyone, without TokenReview and SubjectAccessReview. Only for a test bench: anyone who reaches the port can create and delete directories.")
	fs.StringVar(&o.Kubeconfig, FlagKubeconfig, o.Kubeconfig, "Path of a kubeconfig for the API server; empty means the in-cluster service account.")
	fs.Float32Var(&o.KubeAPIQPS, FlagKubeAPIQPS, o.KubeAPIQPS, "Queries per second to the API server (reviews that miss the caches).")
	fs.IntVar(&o.KubeAPIBurst, FlagKubeAPIBurst, o.KubeAPIBurst, "Burst of queries to the API server.")
	fs.StringVar(&o.SELinux, FlagSELinux, o.SELinux, "Whether new volume directories and the directory of each pool prepared by PUT /v1/pools/NAME get the --"+FlagSELinuxContext+" label: on, off, or auto (when SELinux is enabled on the host, as "+selinux.DefaultFS+" shows it to the manager).")
	fs.StringVar(&o.SELinuxContext, FlagSELinuxContext, o.SELinuxContext, "SELinux context (user:role:type:level) given to the directories the manager makes, so that pods may use them on SELinux-enforcing hosts.")
}

// Validate checks the options, reporting every one that cannot work, and
// keeps the parsed pools for Complete.
func (o *Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, fmt.Errorf("--%s (or $%s) is required", FlagNodeName, EnvNodeName))
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); o.Namespace != "" && len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--%s %q: not a namespace name: %s", FlagNamespace, o.Namespace, strings.Join(msgs, "; ")))
	}
	if o.PoolsConfig != "" {
		pools, root, err := readPoolsConfig(o.PoolsConfig)
		if err != nil {
			errs = append(errs, err)
		}
		o.Pools, o.PoolRoot = pools, root
	}
	pools, err := parsePools(o.Pools)
	if err != nil {
		errs = append(errs, err)
	} else if err := disk.ValidatePaths(pools, o.PoolRoot); err != nil {
		errs = append(errs, fmt.Errorf("--%s, --%s: %w", FlagPool, FlagPoolRoot, err))
	}
	o.pools = pools
	if o.overcommit, err = parseOvercommit(o.PoolOvercommit); err != nil {
		errs = append(errs, err)
	}
	if o.StateDir == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", FlagStateDir))
	}
	if o.BootIDFile == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", FlagBootIDFile))
	}
	for name, addr := range map[string]string{FlagListenAddress: o.ListenAddress, FlagHealthAddress: o.HealthAddress} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", name, addr, err))
		}
	}
	if o.ListenAddress == o.HealthAddress {
		errs = append(errs, fmt.Errorf("--%s and --%s must differ: /v1 is never served with the probes", FlagListenAddress, FlagHealthAddress))
	}
	if o.CertificateLifetime < certs.MinLifetime {
		errs = append(errs, fmt.Errorf("--%s must be at least %s (the CertificateSigningRequest API's least expirationSeconds)", FlagCertificateLifetime, certs.MinLifetime))
	}
	if o.CloneConcurrency <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagCloneConcurrency))
	}
	if o.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagMaxBodyBytes))
	}
	for name, d := range map[string]time.Duration{
		FlagReadHeaderTimeout: o.ReadHeaderTimeout, FlagReadTimeout: o.ReadTimeout, FlagWriteTimeout: o.WriteTimeout,
		FlagIdleTimeout: o.IdleTimeout, FlagShutdownTimeout: o.ShutdownTimeout, FlagUsageMetricsInterval: o.UsageMetricsInterval,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive", name))
		}
	}
	errs = append(errs, o.validateAuth()...)
	if _, err := selinux.ParseMode(o.SELinux); err != nil {
		errs = append(errs, fmt.Errorf("--%s: %w", FlagSELinux, err))
	}
	if err := selinux.ValidateContext(o.SELinuxContext); err != nil {
		errs = append(errs, fmt.Errorf("--%s: %w", FlagSELinuxContext, err))
	}
	return errors.Join(errs...)
}

// validateAuth reports the authentication and review flags that cannot
// work: the caches, the audience and the limits.
func (o *Options) validateAuth() []error {
	var errs []error
	for name, d := range map[string]time.Duration{
		FlagTokenCacheTTL: o.Auth.AuthenticatedTTL, FlagTokenRejectedCacheTTL: o.Auth.UnauthenticatedTTL,
		FlagAllowedCacheTTL: o.Auth.AllowedTTL, FlagDeniedCacheTTL: o.Auth.DeniedTTL, FlagPodCacheTTL: o.Auth.PodTTL,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative", name))
		}
	}
	if o.Auth.CacheSize <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagAuthCacheSize))
	}
	if o.Auth.Audience == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", FlagTokenAudience))
	}
	if o.Limits.MaxInFlight <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagMaxInFlightPerAddress))
	}
	for _, pair := range []struct {
		qps          float64
		burst        int
		qName, bName string
	}{
		{o.Limits.PerAddressQPS, o.Limits.PerAddressBurst, FlagReviewsPerAddressQPS, FlagReviewsPerAddressBurst},
		{o.Limits.PerUserQPS, o.Limits.PerUserBurst, FlagReviewsPerUserQPS, FlagReviewsPerUserBurst},
		{o.Limits.StrangersQPS, o.Limits.StrangersBurst, FlagReviewsStrangersQPS, FlagReviewsStrangersBurst},
	} {
		if pair.qps <= 0 || pair.burst <= 0 {
			errs = append(errs, fmt.Errorf("--%s and --%s must be positive", pair.qName, pair.bName))
		}
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--%s and --%s must be positive", FlagKubeAPIQPS, FlagKubeAPIBurst))
	} else if o.Limits.StrangersQPS >= float64(o.KubeAPIQPS) || o.Limits.StrangersBurst >= o.KubeAPIBurst {
		errs = append(errs, fmt.Errorf("--%s (%g) and --%s (%d) must be below --%s (%g) and --%s (%d): the difference is what the own callers can count on while strangers flood the manager",
			FlagReviewsStrangersQPS, o.Limits.StrangersQPS, FlagReviewsStrangersBurst, o.Limits.StrangersBurst, FlagKubeAPIQPS, o.KubeAPIQPS, FlagKubeAPIBurst, o.KubeAPIBurst))
	}
	return errs
}

// parsePools parses the --pool values into a map from name to path; the
// disk package checks the paths.
func parsePools(values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, fmt.Errorf("--%s: at least one pool is needed", FlagPool)
	}
	pools := map[string]string{}
	for _, p := range values {
		name, path, ok := strings.Cut(p, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("--%s %q: want NAME=PATH", FlagPool, p)
		}
		if err := managerapi.ValidatePoolName(name); err != nil {
			return nil, fmt.Errorf("--%s %q: %w", FlagPool, p, err)
		}
		if _, dup := pools[name]; dup {
			return nil, fmt.Errorf("--%s: pool %q is given twice", FlagPool, name)
		}
		pools[name] = path
	}
	return pools, nil
}

// parseOvercommit parses the --pool-overcommit values into a map from
// pool name to ratio.
func parseOvercommit(values []string) (map[string]float64, error) {
	ratios := map[string]float64{}
	for _, v := range values {
		name, ratio, ok := strings.Cut(v, "=")
		if !ok || name == "" || ratio == "" {
			return nil, fmt.Errorf("--%s %q: want NAME=RATIO", FlagPoolOvercommit, v)
		}
		if err := managerapi.ValidatePoolName(name); err != nil {
			return nil, fmt.Errorf("--%s %q: %w", FlagPoolOvercommit, v, err)
		}
		r, err := strconv.ParseFloat(ratio, 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("--%s %q: the ratio must be a number above 0 (1 promises the capacity, 1.5 half as much again)", FlagPoolOvercommit, v)
		}
		if _, dup := ratios[name]; dup {
			return nil, fmt.Errorf("--%s: pool %q is given twice", FlagPoolOvercommit, name)
		}
		ratios[name] = r
	}
	return ratios, nil
}

// selinuxLabeler is the Store's Labeler per --selinux (o must have passed
// Validate), logged.
func (o *Options) selinuxLabeler(logger klog.Logger) selinux.Labeler {
	mode := selinux.Mode(o.SELinux)
	if mode.Enabled(o.selinuxFS) {
		logger.Info("SELinux labelling on: new volume directories and prepared pool directories get the context", "context", o.SELinuxContext, "mode", mode)
		return selinux.New(o.SELinuxContext, true)
	}
	reason := "--" + FlagSELinux + "=off"
	if mode == selinux.ModeAuto {
		reason = "SELinux is not enabled (no selinuxfs at " + o.selinuxFS + ")"
	}
	logger.Info("SELinux labelling off", "mode", mode, "reason", reason)
	return selinux.New(o.SELinuxContext, false)
}

// tlsDir is the directory of the serving certificate: TLSDir, or the tls
// directory in StateDir.
func (o *Options) tlsDir() string {
	if o.TLSDir != "" {
		return o.TLSDir
	}
	return filepath.Join(o.StateDir, "tls")
}
