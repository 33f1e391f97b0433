package fakenodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/e2e/framework/localcluster"
)

// Command is the fakenodes program for component.Main: the fake nodes'
// Options, the cluster and what to do (keep the nodes, or delete them).
type Command struct {
	Options
	kubeconfig string
	delete     bool
	stdout     io.Writer
}

var _ component.Program = &Command{}

// NewCommand returns the program; it prints "ready" (or how many nodes it
// deleted) to stdout.
func NewCommand(stdout io.Writer) *Command {
	return &Command{stdout: stdout}
}

// AddFlags binds the options to fs.
func (c *Command) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster (default: $KUBECONFIG).")
	fs.StringVar(&c.Prefix, "prefix", "hostpath-fake-", "Name prefix of the fake nodes.")
	fs.IntVar(&c.Count, "count", 10, "Number of fake nodes.")
	fs.DurationVar(&c.RenewInterval, "renew-interval", 10*time.Second, "How often each node's Lease is renewed.")
	fs.BoolVar(&c.NoTaint, "no-taint", false, "Do not taint the nodes NoSchedule (by default only pods tolerating "+localcluster.FakeNodeLabel+" land there).")
	fs.IntVar(&c.Workers, "workers", 16, "Parallel API writers.")
	fs.BoolVar(&c.delete, "delete", false, "Delete every fake node instead.")
}

// Validate checks the options that the chosen action uses.
func (c *Command) Validate() error {
	if c.delete {
		if c.Workers < 1 {
			return errors.New("workers must be at least 1")
		}
		return nil
	}
	return c.Options.Validate()
}

// Run creates and renews the fake nodes until ctx ends, or deletes them.
func (c *Command) Run(ctx context.Context) error {
	// Enough for one renewal round of every lease per interval, twice over.
	qps := float32(2*c.Count)/float32(max(c.RenewInterval.Seconds(), 1)) + 50
	cfg, err := component.RESTConfig(c.kubeconfig, qps, int(qps)*2, "hostpath-fakenodes")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	return c.run(ctx, client)
}

// run is Run with its client.
func (c *Command) run(ctx context.Context, client kubernetes.Interface) error {
	if c.delete {
		n, err := Delete(ctx, client, c.Workers)
		_, _ = fmt.Fprintf(c.stdout, "deleted %d fake nodes\n", n)
		return err
	}
	return Run(ctx, client, c.Options, func() { _, _ = fmt.Fprintln(c.stdout, "ready") })
}
