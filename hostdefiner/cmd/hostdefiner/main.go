// Command hostdefiner will keep one HostDefinition per (node, storage pool)
// and bring new nodes up to date. Today it only validates its flags and
// serves /healthz; see hostdefiner/internal/app.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"hostpath.dev/hostdefiner/internal/app"
)

func main() {
	opts := app.NewOptions()
	fs := pflag.CommandLine
	opts.AddFlags(fs)
	pflag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		klog.ErrorS(err, "Host definer failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, opts *app.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	return app.Run(ctx, opts)
}
