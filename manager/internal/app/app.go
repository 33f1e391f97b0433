// Package app wires the manager's flags to its HTTP servers in three steps:
// Options hold the flags and Validate checks them; Complete opens the
// listeners and builds what serves on them (the host identity, the disk
// Store, the authorizer with its per-address limits, the serving
// certificate's Manager, the HTTP servers) into a Config; Config.Run gets
// the serving certificate and serves until its context ends, then shuts
// down gracefully. Options.Run does all three for component.Main.
//
// Two listeners: /v1 over HTTPS on --listen-address, with the certificate
// the certs package gets from the cluster (TLS handshakes fail until it
// has one), and /healthz, /readyz (ready once /v1 is served) and /metrics
// in plain HTTP on --health-address. With --insecure-skip-auth, /v1 is
// plain HTTP and no certificate is requested. With --namespace (default
// $POD_NAMESPACE), Run also watches the CA bundle ConfigMap there
// (trust.WatchConfigMaps), and the certificate is renewed at once when it
// no longer chains to that bundle. The API calls go through the manager's
// own client (internal/kube), not a clientset.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust"
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/certs"
	"hostpath.dev/manager/internal/disk"
	"hostpath.dev/manager/internal/identity"
	"hostpath.dev/manager/internal/kube"
	"hostpath.dev/manager/internal/server"
)

// The disk package's Store is the server's Backend.
var _ server.Backend = &disk.Store{}

// userAgent is the manager's user agent at the API server.
const userAgent = "hostpath-manager"

// kubeAPI is what the manager asks the API server, as the packages that
// ask take it: kube.Client's resources (tests give a fake clientset's).
type kubeAPI struct {
	tokens     review.TokenReviews
	sars       review.SubjectAccessReviews
	pods       auth.Pods
	csrs       certs.CSRs
	configMaps trust.ConfigMaps // of Options.Namespace
	// pvs, claims and classes are what the Store asks (kube.Owners)
	// before a caller bound to another node changes a multihost copy.
	pvs     kube.PVGetter
	claims  kube.Claims
	classes kube.ClassGetter
}

// Config is the manager that Complete built from valid Options, ready to
// serve.
type Config struct {
	// listener is where /v1 is served, healthListener where the probes
	// and metrics are.
	listener, healthListener net.Listener
	// server serves /v1 on the listener, health the probes and metrics;
	// Run sets their BaseContext.
	server, health *http.Server
	// certs gets and renews the serving certificate; nil with
	// --insecure-skip-auth (plain HTTP).
	certs *certs.Manager
	// bundle is the CA bundle the callers trust, certs' Roots, which Run
	// keeps equal to the ConfigMap in namespace through configMaps; nil
	// without --namespace (or with --insecure-skip-auth).
	bundle     *trust.Bundle
	configMaps trust.ConfigMaps
	namespace  string
	// shutdownTimeout bounds the graceful shutdown.
	shutdownTimeout time.Duration
	// refreshUsage refreshes the usage figures /metrics exports until its
	// context ends (the server's RunUsageRefresher).
	refreshUsage func(context.Context)
	// nodeName, poolNames, poolRoot, hostID and tlsDir say at start what
	// is served.
	nodeName  string
	poolNames []string
	poolRoot  string
	hostID    string
	tlsDir    string
}

// Run builds the manager (Complete) and serves it until ctx ends. o must
// have passed Validate.
func (o *Options) Run(ctx context.Context) error {
	cfg, err := o.Complete(ctx)
	if err != nil {
		return err
	}
	return cfg.Run(ctx)
}

// Complete opens the listeners on o.ListenAddress and o.HealthAddress and
// builds what serves on them. o must have passed Validate.
func (o *Options) Complete(ctx context.Context) (*Config, error) {
	ln, err := net.Listen("tcp", o.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.ListenAddress, err)
	}
	healthLn, err := net.Listen("tcp", o.HealthAddress)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("listen on %s for health and metrics: %w", o.HealthAddress, err)
	}
	cfg, err := o.completeOn(ctx, ln, healthLn)
	if err != nil {
		_ = ln.Close()
		_ = healthLn.Close()
		return nil, err
	}
	return cfg, nil
}

// completeOn builds the manager that serves /v1 on ln and the probes on
// healthLn: the host identity, the disk Store on the pools Validate parsed,
// the API client, the authorizer, the certificate Manager and the servers.
// The Store asks the API server about the PVs and claims of its volumes
// through kube.Owners (none with --insecure-skip-auth, where no caller is
// ever bound to another node).
func (o *Options) completeOn(ctx context.Context, ln, healthLn net.Listener) (*Config, error) {
	if o.pools == nil {
		return nil, errors.New("the options have not been validated")
	}
	id, err := identity.Load(ctx, identity.Config{StateDir: o.StateDir, BootIDFile: o.BootIDFile, MachineIDFile: o.MachineIDFile})
	if err != nil {
		return nil, fmt.Errorf("load the host identity: %w", err)
	}
	api, err := o.kubeAPI(ctx)
	if err != nil {
		return nil, err
	}
	labeler := o.selinuxLabeler(klog.FromContext(ctx))
	dcfg := disk.Config{NodeName: o.NodeName, Pools: o.pools, PoolRoot: o.PoolRoot, Overcommit: o.overcommit, Identity: id, Labeler: labeler, CloneConcurrency: o.CloneConcurrency}
	if api != nil {
		dcfg.Owners = kube.NewOwners(api.pvs, api.claims, api.classes, kube.OwnersOptions{})
	}
	store, err := disk.New(dcfg)
	if err != nil {
		return nil, fmt.Errorf("set up storage: %w", err)
	}
	lo := o.Limits
	lo.OwnNamespace = o.Namespace
	budget := review.NewBudget(lo)
	scfg := server.Config{NodeName: o.NodeName, Backend: store, Authorizer: o.authorizer(api, budget), Budget: budget, MaxBodyBytes: o.MaxBodyBytes, UsageInterval: o.UsageMetricsInterval}
	var cm *certs.Manager
	var bundle *trust.Bundle
	if api != nil {
		if cm, bundle, err = o.certManager(ctx, api.csrs); err != nil {
			return nil, err
		}
		scfg.Ready, scfg.Certificate = readiness(cm), cm.Status
		scfg.MetricsGuard = o.metricsGuard(api, budget)
	}
	handler, err := server.New(scfg)
	if err != nil {
		return nil, err
	}
	cfg := &Config{
		listener: ln, healthListener: healthLn,
		server: o.httpServer(handler), health: component.NewServer(handler.HealthHandler(), o.timeouts()),
		certs: cm, bundle: bundle, namespace: o.Namespace, shutdownTimeout: o.ShutdownTimeout, refreshUsage: handler.RunUsageRefresher,
		nodeName: o.NodeName, poolNames: store.PoolNames(), poolRoot: o.PoolRoot, hostID: id.HostID(),
	}
	if cm != nil {
		cfg.server.TLSConfig, cfg.tlsDir, cfg.configMaps = cm.TLSConfig(), o.tlsDir(), api.configMaps
	}
	return cfg, nil
}

// certManager is the serving certificate's Manager, with the CA bundle it
// checks its certificate against (Run watches it) when o names the
// namespace.
func (o *Options) certManager(ctx context.Context, csrs certs.CSRs) (*certs.Manager, *trust.Bundle, error) {
	cfg := certs.Config{NodeName: o.NodeName, Dir: o.tlsDir(), Client: csrs, Lifetime: o.CertificateLifetime}
	var bundle *trust.Bundle
	if o.Namespace != "" {
		bundle = trust.NewBundle()
		cfg.Roots = bundle
	} else {
		klog.FromContext(ctx).Info("No --"+FlagNamespace+" (nor $"+EnvPodNamespace+"): the serving certificate is not checked against the CA bundle, so after a reinstall or the removal of its CA it is renewed only at 70% of its life",
			"configMap", managerapi.CABundleConfigMap)
	}
	cm, err := certs.New(cfg)
	return cm, bundle, err
}

// httpServer is the /v1 server of handler, with the timeouts of o.
func (o *Options) httpServer(handler http.Handler) *http.Server {
	return component.NewServer(handler, o.timeouts())
}

// timeouts are the timeouts of o, for both of the manager's servers (the
// health server's answers do not stream: the manager has no profiling).
func (o *Options) timeouts() component.Timeouts {
	return component.Timeouts{ReadHeader: o.ReadHeaderTimeout, Read: o.ReadTimeout, Write: o.WriteTimeout, Idle: o.IdleTimeout}
}

// kubeAPI is the API client, for the reviews, the CSRs, the CA bundle and
// the owners of volumes; nil with --insecure-skip-auth, which needs none
// of them (logged as an error).
func (o *Options) kubeAPI(ctx context.Context) (*kubeAPI, error) {
	if o.InsecureSkipAuth {
		klog.FromContext(ctx).Error(nil, "WARNING: authentication, authorisation and TLS are OFF (--"+FlagInsecureSkipAuth+"): /v1 is served in plain HTTP, and anyone who reaches the port can create and delete directories in the pools")
		return nil, nil
	}
	if o.kube != nil {
		return o.kube, nil
	}
	cfg, err := component.RESTConfig(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst, userAgent)
	if err != nil {
		return nil, err
	}
	c, err := kube.New(cfg)
	if err != nil {
		return nil, err
	}
	pods := func(ns string) auth.PodGetter { return c.Pods(ns) }
	claims := func(ns string) kube.ClaimGetter { return c.PersistentVolumeClaims(ns) }
	return &kubeAPI{tokens: c.TokenReviews(), sars: c.SubjectAccessReviews(), pods: pods, csrs: c.CertificateSigningRequests(), configMaps: c.ConfigMaps(o.Namespace),
		pvs: c.PersistentVolumes(), claims: claims, classes: c.StorageClasses()}, nil
}

// readiness is the server's Ready: an error saying what is awaited while
// cm holds no valid certificate.
func readiness(cm *certs.Manager) func() error {
	return func() error {
		if cm.Ready() {
			return nil
		}
		msg := "no valid serving certificate: waiting for a CertificateSigningRequest of signer " + managerapi.SignerName + " to be approved and signed (by the host definer)"
		if st := cm.Status(); st.RenewalError != "" {
			msg += "; last attempt: " + st.RenewalError
		}
		return errors.New(msg)
	}
}

// authorizer returns the Reviewer of the node, which asks the API server
// through api within budget; without api (--insecure-skip-auth),
// AllowAll.
func (o *Options) authorizer(api *kubeAPI, budget *review.Budget) auth.Authorizer {
	if api == nil {
		return auth.AllowAll{}
	}
	opts := o.Auth
	opts.Budget, opts.NodeName = budget, o.NodeName
	return auth.NewReviewer(api.tokens, api.sars, api.pods, opts)
}

// metricsGuard guards /metrics as the kubelet does: a token of the API
// server's audience allowed get on the nonResourceURL /metrics, reviewed
// through api within budget, with the caches' lifetimes of /v1.
func (o *Options) metricsGuard(api *kubeAPI, budget *review.Budget) func(http.Handler) http.Handler {
	opts := o.Auth.Options
	opts.Budget = budget
	return review.URLGuard(api.tokens, api.sars, opts, userAgent)
}

// Run gets the serving certificate (see the certs package) and serves
// /v1 and the probes until ctx ends, then shuts down gracefully: requests
// in flight get the shutdown timeout to finish. Meanwhile it refreshes
// the usage figures of /metrics, and waits at return for a refresh under
// way to end.
func (c *Config) Run(ctx context.Context) error {
	defer c.listener.Close()
	defer c.healthListener.Close()
	logger := klog.FromContext(ctx)
	// Requests keep the logger but not the cancellation: at shutdown, calls
	// in flight finish their work.
	base := func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	c.server.BaseContext, c.health.BaseContext = base, base
	uctx, cancelUsage := context.WithCancel(ctx)
	usageDone := make(chan struct{})
	go func() { defer close(usageDone); c.refreshUsage(uctx) }()
	defer func() { cancelUsage(); <-usageDone }()
	if c.certs != nil {
		cctx, cancel := context.WithCancel(ctx)
		defer func() { cancel(); <-c.certs.Done() }()
		if err := c.certs.Start(cctx); err != nil {
			return err
		}
		go c.logServing(cctx)
		if err := c.watchBundle(cctx); err != nil {
			return err
		}
	}
	errc := make(chan error, 2)
	go func() { errc <- c.serveAPI() }()
	go func() { errc <- fmt.Errorf("serve health and metrics: %w", c.health.Serve(c.healthListener)) }()
	logger.Info("Serving the manager API", "address", c.listener.Addr().String(), "tls", c.certs != nil, "tlsDir", c.tlsDir, "namespace", c.namespace,
		"healthAddress", c.healthListener.Addr().String(), "node", c.nodeName, "pools", c.poolNames, "poolRoot", c.poolRoot, "hostID", c.hostID)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("Shutting down", "timeout", c.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
	defer cancel()
	err := c.server.Shutdown(sctx)
	if herr := c.health.Shutdown(sctx); err == nil {
		err = herr
	}
	if err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// serveAPI serves /v1 on the listener: over TLS with the certificate
// Manager's certificate, in plain HTTP without one.
func (c *Config) serveAPI() error {
	var err error
	if c.certs != nil {
		err = c.server.ServeTLS(c.listener, "", "")
	} else {
		err = c.server.Serve(c.listener)
	}
	return fmt.Errorf("serve: %w", err)
}

// logServing logs when /v1 is served over HTTPS: once the certificate
// Manager holds a certificate.
func (c *Config) logServing(ctx context.Context) {
	select {
	case <-c.certs.Obtained():
		klog.FromContext(ctx).Info("Serving /v1 over HTTPS", "address", c.listener.Addr().String(), "serverName", managerapi.ServerName(c.nodeName))
	case <-ctx.Done():
	}
}

// bundleSyncTimeout bounds the wait for the CA bundle's first listing
// before the certificate is checked against it at once; a bundle loaded
// later is checked within certs.TrustCheckInterval.
const bundleSyncTimeout = 30 * time.Second

// watchBundle keeps c.bundle equal to the CA bundle ConfigMap until ctx
// ends (trust.WatchConfigMaps), and has the certificate Manager check its
// certificate against the bundle as soon as it is first listed, waiting
// at most bundleSyncTimeout. Meanwhile, and when there is no bundle, the
// stored certificate is served unchecked. Nothing without a bundle.
func (c *Config) watchBundle(ctx context.Context) error {
	if c.bundle == nil {
		return nil
	}
	synced, err := trust.WatchConfigMaps(ctx, c.configMaps, c.namespace, c.bundle)
	if err != nil {
		return err
	}
	go func() {
		logger := klog.FromContext(ctx).WithValues("configMap", klog.KRef(c.namespace, managerapi.CABundleConfigMap))
		wctx, cancel := context.WithTimeout(ctx, bundleSyncTimeout)
		defer cancel()
		switch {
		case !cache.WaitForCacheSync(wctx.Done(), synced):
			if ctx.Err() == nil {
				logger.Error(nil, "The CA bundle is not loaded yet (can the manager read the ConfigMap?); the serving certificate is checked against it once it is", "waited", bundleSyncTimeout)
			}
		case c.bundle.Pool() == nil:
			logger.Info("No CA bundle yet; the serving certificate is checked against it once it is published")
		default:
			logger.V(2).Info("Loaded the CA bundle; checking the serving certificate against it")
			c.certs.CheckTrust()
		}
	}()
	return nil
}
