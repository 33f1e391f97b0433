// Package app wires the manager's flags to its HTTP server in three steps:
// Options hold the flags and Validate checks them; Complete opens the
// listener and builds what serves on it (the host identity, the disk Store,
// the authorizer with its per-address limits, the HTTP server) into a
// Config; Config.Run serves until its context ends, then shuts down
// gracefully. Options.Run does all three for component.Main.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/disk"
	"hostpath.dev/manager/internal/identity"
	"hostpath.dev/manager/internal/server"
	"hostpath.dev/manager/pkg/component"
)

// The disk package's Store is the server's Backend.
var _ server.Backend = &disk.Store{}

// userAgent is the manager's user agent at the API server.
const userAgent = "hostpath-manager"

// Config is the manager that Complete built from valid Options, ready to
// serve.
type Config struct {
	// listener is where the API is served.
	listener net.Listener
	// server serves the API on the listener; Run sets its BaseContext.
	server *http.Server
	// shutdownTimeout bounds the graceful shutdown.
	shutdownTimeout time.Duration
	// nodeName, poolNames, poolRoot and hostID say at start what is
	// served.
	nodeName  string
	poolNames []string
	poolRoot  string
	hostID    string
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

// Complete opens the listener on o.ListenAddress and builds what serves on
// it. o must have passed Validate.
func (o *Options) Complete(ctx context.Context) (*Config, error) {
	ln, err := net.Listen("tcp", o.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.ListenAddress, err)
	}
	cfg, err := o.completeOn(ctx, ln)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return cfg, nil
}

// completeOn builds the manager that serves on ln: the host identity, the
// disk Store on the pools Validate parsed, the authorizer and the server.
func (o *Options) completeOn(ctx context.Context, ln net.Listener) (*Config, error) {
	if o.pools == nil {
		return nil, errors.New("the options have not been validated")
	}
	id, err := identity.Load(ctx, identity.Config{StateDir: o.StateDir, BootIDFile: o.BootIDFile, MachineIDFile: o.MachineIDFile})
	if err != nil {
		return nil, fmt.Errorf("load the host identity: %w", err)
	}
	store, err := disk.New(disk.Config{NodeName: o.NodeName, Pools: o.pools, PoolRoot: o.PoolRoot, Identity: id})
	if err != nil {
		return nil, fmt.Errorf("set up storage: %w", err)
	}
	limits := auth.NewPerAddress(o.Limits)
	authorizer, err := o.authorizer(ctx, limits)
	if err != nil {
		return nil, err
	}
	handler, err := server.New(server.Config{NodeName: o.NodeName, Backend: store, Authorizer: authorizer, Limits: limits, MaxBodyBytes: o.MaxBodyBytes})
	if err != nil {
		return nil, err
	}
	return &Config{
		listener: ln,
		server: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: o.ReadHeaderTimeout,
			ReadTimeout:       o.ReadTimeout,
			WriteTimeout:      o.WriteTimeout,
			IdleTimeout:       o.IdleTimeout,
			MaxHeaderBytes:    64 << 10,
		},
		shutdownTimeout: o.ShutdownTimeout,
		nodeName:        o.NodeName,
		poolNames:       store.PoolNames(),
		poolRoot:        o.PoolRoot,
		hostID:          id.HostID(),
	}, nil
}

// authorizer returns the Reviewer, which asks the API server, bounded by
// limits; with --insecure-skip-auth, AllowAll.
func (o *Options) authorizer(ctx context.Context, limits *auth.PerAddress) (auth.Authorizer, error) {
	if o.InsecureSkipAuth {
		klog.FromContext(ctx).Error(nil, "WARNING: authentication and authorisation are OFF (--"+FlagInsecureSkipAuth+"): anyone who reaches the port can create and delete directories in the pools")
		return auth.AllowAll{}, nil
	}
	cs, err := component.Clientset(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst, userAgent)
	if err != nil {
		return nil, err
	}
	opts := o.Auth
	opts.Limits = limits
	return auth.NewReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), opts), nil
}

// Run serves the API until ctx ends, then shuts down gracefully: requests in
// flight get the shutdown timeout to finish.
func (c *Config) Run(ctx context.Context) error {
	defer c.listener.Close()
	logger := klog.FromContext(ctx)
	// Requests keep the logger but not the cancellation: at shutdown, calls
	// in flight finish their work.
	c.server.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	errc := make(chan error, 1)
	go func() { errc <- c.server.Serve(c.listener) }()
	logger.Info("Serving the manager API", "address", c.listener.Addr().String(), "node", c.nodeName, "pools", c.poolNames, "poolRoot", c.poolRoot, "hostID", c.hostID)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("Shutting down", "timeout", c.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
	defer cancel()
	if err := c.server.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}
