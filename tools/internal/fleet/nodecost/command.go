package nodecost

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/fleet"
)

// Usage is the command lines of the subcommands of Commands.
const Usage = "node-cost [flags] | node-cost-report RESULT.json"

// Commands returns the subcommands, for cli.Main:
//
//	node-cost [flags]: Run; the Result as JSON to --out, the Report to
//	    stdout.
//	node-cost-report RESULT.json: the Report of a Result.
func Commands(stdout, stderr io.Writer) map[string]cli.Command {
	return map[string]cli.Command{
		"node-cost": func(ctx context.Context, argv []string) error {
			var f runFlags
			if _, err := cli.ParseFlags("node-cost", stderr, &f, argv); err != nil {
				return err
			}
			f.o.Logf = cli.Logf(stderr, time.Now)
			var fo fleet.Options
			run := func(kube kubernetes.Interface, hp hostpathclient.Interface) (Result, error) {
				return Run(ctx, kube, hp, f.o)
			}
			return fleet.RunAndReport(&f.fleet, &fo, stdout, run, Report)
		},
		"node-cost-report": fleet.ReportCommand(stdout, "node-cost-report RESULT.json", Report),
	}
}

// runFlags are the flags of "node-cost".
type runFlags struct {
	o     Options
	fleet fleet.Flags
	steps string
}

// AddFlags binds the flags to fs.
func (f *runFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.fleet.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster, an administrator's (default: $KUBECONFIG).")
	fs.StringVar(&f.fleet.Out, "out", "", "File for the result as JSON (default: none).")
	fs.StringVar(&f.o.Namespace, "namespace", "hostpath-system", "The product's namespace.")
	fs.StringVar(&f.o.Prefix, "prefix", "hostpath-nodecost-", "Name prefix of the fake nodes.")
	fs.StringVar(&f.steps, "nodes", "1000,5000", "The numbers of fake nodes after each step, comma-separated, increasing.")
	fs.DurationVar(&f.o.Settle, "settle", 3*time.Minute, "Time between two readings after a step (the first is this long after it).")
	fs.IntVar(&f.o.Readings, "readings", 3, "Readings after each step.")
	fs.StringVar(&f.o.Pool, "pool", "default", "Pool whose HostDefinition of a real node every fake node gets a copy of.")
	fs.IntVar(&f.o.Workers, "workers", 16, "Fake nodes written at once.")
}

// Complete parses --nodes into the Options.
func (f *runFlags) Complete() error {
	f.o.Steps = nil
	for s := range strings.SplitSeq(f.steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--nodes %q: %w", f.steps, err)
		}
		f.o.Steps = append(f.o.Steps, n)
	}
	return f.o.Validate()
}
