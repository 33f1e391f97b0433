// Command fakenodes adds lightweight fake nodes to the local cluster and keeps
// them Ready by renewing their Leases (scripts/fake-nodes.sh runs it):
//
//	fakenodes --count 100 [--prefix hostpath-fake-] [--renew-interval 10s] [--no-taint]
//	    create (or adopt) the nodes, print "ready" to stdout, renew until SIGTERM
//	fakenodes --delete
//	    delete every fake node and its Lease
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"hostpath.dev/e2e/internal/fakenodes"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "fakenodes failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	o := fakenodes.Options{}
	var kubeconfig string
	var del bool
	fs := flag.NewFlagSet("fakenodes", flag.ExitOnError)
	klog.InitFlags(fs)
	fs.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster (default: $KUBECONFIG).")
	fs.StringVar(&o.Prefix, "prefix", "hostpath-fake-", "Name prefix of the fake nodes.")
	fs.IntVar(&o.Count, "count", 10, "Number of fake nodes.")
	fs.DurationVar(&o.RenewInterval, "renew-interval", 10*time.Second, "How often each node's Lease is renewed.")
	fs.BoolVar(&o.NoTaint, "no-taint", false, "Do not taint the nodes NoSchedule (by default only pods tolerating "+fakenodes.TaintKey+" land there).")
	fs.IntVar(&o.Workers, "workers", 16, "Parallel API writers.")
	fs.BoolVar(&del, "delete", false, "Delete every fake node instead.")
	_ = fs.Parse(os.Args[1:])

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "hostpath-fakenodes"
	// Enough for one renewal round of every lease per interval, twice over.
	cfg.QPS = float32(2*o.Count)/float32(max(o.RenewInterval.Seconds(), 1)) + 50
	cfg.Burst = int(cfg.QPS) * 2
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	if del {
		n, err := fakenodes.Delete(ctx, client, o.Workers)
		fmt.Printf("deleted %d fake nodes\n", n)
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	return fakenodes.Run(ctx, client, o, func() { fmt.Println("ready") })
}
