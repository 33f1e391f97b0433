package benchfleet

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/fleet"
)

// Usage is the command line of benchfleet, for cli.Main.
const Usage = "run [flags] | report RESULT.json"

// command holds where the subcommands write.
type command struct {
	stdout, stderr io.Writer
}

// Commands returns the subcommands of benchfleet for cli.Main:
//
//	run [flags]: Run; the Result as JSON to --out, the Report to stdout.
//	report RESULT.json: the Report of a Result.
func Commands(stdout, stderr io.Writer) map[string]cli.Command {
	c := command{stdout: stdout, stderr: stderr}
	return map[string]cli.Command{"run": c.run, "report": fleet.ReportCommand(stdout, "report RESULT.json", Report)}
}

// runFlags are the flags of "benchfleet run".
type runFlags struct {
	o               Options
	fleet           fleet.Flags
	instances, ends string
}

// AddFlags binds the flags of "benchfleet run" to fs.
func (f *runFlags) AddFlags(fs *flag.FlagSet) {
	f.fleet.AddFlags(fs, &f.o.Fleet)
	fs.StringVar(&f.instances, "instances", "10:1000,100:200", "Instance runs, as K:N pairs (N claims over K instances), comma-separated; empty for none.")
	fs.StringVar(&f.o.NodeClass, "node-class", "hostpath-immediate", "Node-mode StorageClass of the instance runs (Immediate).")
	fs.StringVar(&f.ends, "endpoints", "10,50,100", "Multihost pool sizes (managers, the real nodes' included), comma-separated; empty for none.")
	fs.IntVar(&f.o.MultihostClaims, "multihost-claims", 10, "Multihost claims per pool size, one at a time.")
	fs.StringVar(&f.o.MultihostClass, "multihost-class", "hostpath-shared", "Multihost StorageClass (Immediate).")
	fs.IntVar(&f.o.Backfill, "backfill", 1000, "Multihost volumes a new node gets; 0 for no backfill step.")
	fs.StringVar(&f.o.Pool, "pool", "default", "Pool of the classes.")
	fs.DurationVar(&f.o.Timeout, "timeout", 15*time.Minute, "Bound of each wait.")
}

// Complete parses the text flags into the Options.
func (f *runFlags) Complete() error {
	if err := f.fleet.Complete(&f.o.Fleet); err != nil {
		return err
	}
	var err error
	if f.o.Instances, err = ParseInstances(f.instances); err != nil {
		return fmt.Errorf("--instances: %w", err)
	}
	if f.o.Endpoints, err = parseInts(f.ends); err != nil {
		return fmt.Errorf("--endpoints: %w", err)
	}
	return nil
}

// ParseInstances reads "K:N,K:N" (empty: none).
func ParseInstances(s string) ([]InstanceRun, error) {
	var out []InstanceRun
	for _, part := range split(s) {
		k, n, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%q is not K:N", part)
		}
		kv, err1 := positive(k)
		nv, err2 := positive(n)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q: K and N must be positive integers", part)
		}
		if kv > fleet.MaxMembers {
			return nil, fmt.Errorf("%q: at most %d instances", part, fleet.MaxMembers)
		}
		out = append(out, InstanceRun{Instances: kv, Claims: nv})
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, part := range split(s) {
		v, err := positive(part)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func split(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func positive(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%q is not a positive integer", s)
	}
	return v, nil
}

func (c command) run(ctx context.Context, argv []string) error {
	var f runFlags
	if _, err := cli.ParseFlags("run", c.stderr, &f, argv); err != nil {
		return err
	}
	f.o.Logf = cli.Logf(c.stderr, time.Now)
	run := func(kube kubernetes.Interface, hp hostpathclient.Interface) (Result, error) {
		return Run(ctx, kube, hp, f.o)
	}
	return fleet.RunAndReport(&f.fleet, &f.o.Fleet, c.stdout, run, Report)
}
