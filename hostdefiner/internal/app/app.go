// Package app wires the host definer's flags to its run loop.
//
// The host definer is not built yet: Run serves /healthz and logs that
// definitions are not managed, so deploying it early changes nothing on any
// node or pool. The HostDefinition controller (DESIGN.md, "Host
// definitions") will be started from here.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// Flag names.
const (
	flagHealthAddress = "health-address"
)

// Options holds the host definer's settings.
type Options struct {
	// HealthAddress is where /healthz is served.
	HealthAddress string
}

// NewOptions returns Options with their defaults.
func NewOptions() *Options {
	return &Options{HealthAddress: ":8081"}
}

// AddFlags binds the options to fs, and klog's flags too.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HealthAddress, flagHealthAddress, o.HealthAddress, "Address (host:port) to serve /healthz on.")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
}

// Validate checks the options.
func (o *Options) Validate() error {
	if _, _, err := net.SplitHostPort(o.HealthAddress); err != nil {
		return fmt.Errorf("--%s %q: %w", flagHealthAddress, o.HealthAddress, err)
	}
	return nil
}

// Run serves /healthz until ctx is done.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	logger.Info("Host definitions are not managed yet; serving /healthz only", "address", o.HealthAddress)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Addr: o.HealthAddress, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve health endpoint: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down health endpoint: %w", err)
	}
	return nil
}
