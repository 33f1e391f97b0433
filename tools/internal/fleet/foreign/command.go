package foreign

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/fleet"
)

// Usage is the command lines of the subcommands of Commands.
const Usage = "foreign [flags] | foreign-report RESULT.json"

// command holds where the subcommands write.
type command struct {
	stdout, stderr io.Writer
}

// Commands returns the subcommands of the phase, for cli.Main:
//
//	foreign [flags]: Run; the Result as JSON to --out, the Report to
//	    stdout. Nothing is done with --foreign 0.
//	foreign-report RESULT.json: the Report of a Result.
func Commands(stdout, stderr io.Writer) map[string]cli.Command {
	c := command{stdout: stdout, stderr: stderr}
	return map[string]cli.Command{
		"foreign":        c.run,
		"foreign-report": fleet.ReportCommand(stdout, "foreign-report RESULT.json", Report),
	}
}

// runFlags are the flags of "foreign": the fleet's as "benchfleet run"
// has them, and the phase's.
type runFlags struct {
	o     Options
	fleet fleet.Flags
}

// AddFlags binds the flags of "foreign" to fs.
func (f *runFlags) AddFlags(fs *flag.FlagSet) {
	f.fleet.AddFlags(fs, &f.o.Fleet)
	fs.IntVar(&f.o.Claims, "foreign", 0, "Claims of another provisioner (N); 0: the phase is off.")
	fs.IntVar(&f.o.Instances, "foreign-instances", 100, "Provisioner instances (K, fake nodes) of the phase.")
	fs.DurationVar(&f.o.Settle, "foreign-settle", 30*time.Second, "Wait before the idle, claims and deleted readings of memory.")
	fs.IntVar(&f.o.Workers, "create-workers", 16, "Claims created at once.")
	fs.StringVar(&f.o.Pool, "pool", "default", "Pool whose Ready HostDefinition on a fleet node makes it up.")
	fs.DurationVar(&f.o.Timeout, "timeout", 15*time.Minute, "Bound of each wait.")
	fs.IntVar(&f.o.Volumes, "volumes", 1000, "Node-mode hostpath volumes (M) of each run of the hostpath volumes step, before the fleet and with it, pinned to the real nodes in turn; 0 and --multihost-volumes 0: the step is off.")
	fs.IntVar(&f.o.MultihostVolumes, "multihost-volumes", 20, "Multihost hostpath volumes (H) of each run of the hostpath volumes step, after the node-mode ones; 0: none.")
}

// Complete parses the text flags into the Options.
func (f *runFlags) Complete() error {
	if err := f.fleet.Complete(&f.o.Fleet); err != nil {
		return err
	}
	if f.o.Claims < 0 {
		return fmt.Errorf("--foreign: %d claims", f.o.Claims)
	}
	if f.o.Volumes < 0 || f.o.MultihostVolumes < 0 {
		return fmt.Errorf("--volumes %d, --multihost-volumes %d: not negative", f.o.Volumes, f.o.MultihostVolumes)
	}
	return nil
}

func (c command) run(ctx context.Context, argv []string) error {
	var f runFlags
	if _, err := cli.ParseFlags("foreign", c.stderr, &f, argv); err != nil {
		return err
	}
	f.o.Logf = cli.Logf(c.stderr, time.Now)
	if f.o.Claims == 0 {
		f.o.Logf("Foreign claims phase off (--foreign 0)")
		return nil
	}
	run := func(kube kubernetes.Interface, hp hostpathclient.Interface) (Result, error) {
		return Run(ctx, kube, hp, f.o)
	}
	return fleet.RunAndReport(&f.fleet, &f.o.Fleet, c.stdout, run, Report)
}
