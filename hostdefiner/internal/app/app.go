// Package app wires the host definer's flags to its run loop.
//
// The host definer is not built yet: Run serves /healthz, /readyz and
// /metrics and logs that definitions are not managed, so deploying it early
// changes nothing on any node or pool. The HostDefinition controller
// (docs/design.md, "Room for what comes next"; README, "Repository layout")
// will be started from here.
package app

import (
	"context"
	"fmt"
	"net"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/pkg/component"
)

// Flag names.
const (
	flagHealthAddress = "health-address"
)

// Options holds the host definer's settings; it is the component.Program
// that main runs.
type Options struct {
	// HealthAddress is where /healthz, /readyz and /metrics are served.
	HealthAddress string
}

var _ component.Program = &Options{}

// NewOptions returns Options with their defaults.
func NewOptions() *Options {
	return &Options{HealthAddress: ":8081"}
}

// AddFlags binds the options to fs (component.Main adds klog's flags).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HealthAddress, flagHealthAddress, o.HealthAddress, "Address (host:port) to serve /healthz, /readyz and /metrics on.")
}

// Validate checks the options.
func (o *Options) Validate() error {
	if _, _, err := net.SplitHostPort(o.HealthAddress); err != nil {
		return fmt.Errorf("--%s %q: %w", flagHealthAddress, o.HealthAddress, err)
	}
	return nil
}

// Run serves /healthz, /readyz and /metrics until ctx is done.
func (o *Options) Run(ctx context.Context) error {
	if err := component.ServeHealth(ctx, o.HealthAddress, component.NewRegistry(), nil); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Host definitions are not managed yet; serving health and metrics only", "address", o.HealthAddress)
	<-ctx.Done()
	return nil
}
