// Command manager is the only hostpath program that touches host disks: on
// each node it serves an authenticated HTTP API that creates, lists, hands
// over and removes volume directories in the node's storage pools, each
// directory owned by one PersistentVolume. See manager/internal/app for its
// flags and the README, "Manager HTTP API".
package main

import (
	"context"
	goflag "flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"hostpath.dev/manager/internal/app"
)

func main() {
	opts := app.NewOptions()
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	pflag.CommandLine.AddGoFlagSet(klogFlags)
	opts.AddFlags(pflag.CommandLine)
	pflag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "Manager failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts *app.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	return app.Run(ctx, opts)
}
