// Command provisioner is the hostpath provisioner: one instance per node
// creates and deletes the node-local volumes of that node through the node's
// hostpath manager. See the README, "Provisioner".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"hostpath.dev/provisioner/internal/app"
)

func main() {
	opts := app.NewOptions()
	fs := pflag.NewFlagSet("provisioner", pflag.ExitOnError)
	opts.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)

	err := opts.Validate()
	if err == nil {
		err = opts.Run(ctx)
	}
	if err != nil {
		logger.Error(err, "Provisioner failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
