package foreign

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	hostpathclient "hostpath.dev/hostdefiner/pkg/generated/clientset/versioned"

	"hostpath.dev/e2e/internal/cli"
	"hostpath.dev/e2e/internal/fleet"
	"hostpath.dev/manager/pkg/runtime/component"
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
	return map[string]cli.Command{"foreign": c.run, "foreign-report": c.report}
}

// runFlags are the flags of "foreign": the fleet's as "benchfleet run"
// has them, and the phase's.
type runFlags struct {
	o                                Options
	kubeconfig, out, provisionerArgs string
}

// AddFlags binds the flags of "foreign" to fs.
func (f *runFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster, an administrator's (default: $KUBECONFIG).")
	fs.StringVar(&f.o.Fleet.Namespace, "namespace", "hostpath-system", "The product's namespace.")
	fs.StringVar(&f.o.Fleet.Prefix, "prefix", "hostpath-fleet-", "Name prefix of the fleet's fake nodes.")
	fs.StringVar(&f.o.Fleet.Dir, "dir", "", "Folder for the members' pools, state, tokens and logs (required).")
	fs.StringVar(&f.o.Fleet.ManagerBin, "manager-bin", "", "The manager binary (required).")
	fs.StringVar(&f.o.Fleet.ProvisionerBin, "provisioner-bin", "", "The provisioner binary (required).")
	fs.StringVar(&f.provisionerArgs, "provisioner-args", "[]", "JSON array of the provisioner DaemonSet's arguments, given to every provisioner first.")
	fs.StringVar(&f.o.Fleet.AddressPrefix, "address-prefix", "198.18.250.", "First three bytes of the members' addresses, with the dot.")
	fs.StringVar(&f.o.Fleet.Device, "device", "hpapi", "Network device that gets the members' addresses.")
	fs.DurationVar(&f.o.Fleet.ReadyTimeout, "ready-timeout", 2*time.Minute, "Bound of the wait for a member's processes to be ready.")
	fs.IntVar(&f.o.Fleet.Workers, "start-workers", 8, "Members started at once.")
	fs.IntVar(&f.o.Claims, "foreign", 0, "Claims of another provisioner (N); 0: the phase is off.")
	fs.IntVar(&f.o.Instances, "foreign-instances", 100, "Provisioner instances (K, fake nodes) of the phase.")
	fs.DurationVar(&f.o.Settle, "foreign-settle", 30*time.Second, "Wait before the idle, claims and deleted readings of memory.")
	fs.IntVar(&f.o.Workers, "create-workers", 16, "Claims created at once.")
	fs.StringVar(&f.o.Pool, "pool", "default", "Pool whose Ready HostDefinition on a fleet node makes it up.")
	fs.DurationVar(&f.o.Timeout, "timeout", 15*time.Minute, "Bound of each wait.")
	fs.StringVar(&f.out, "out", "", "File for the result as JSON (default: none).")
}

// Complete parses the text flags into the Options.
func (f *runFlags) Complete() error {
	if err := json.Unmarshal([]byte(f.provisionerArgs), &f.o.Fleet.ProvisionerArgs); err != nil {
		return fmt.Errorf("--provisioner-args: %w", err)
	}
	if f.o.Claims < 0 {
		return fmt.Errorf("--foreign: %d claims", f.o.Claims)
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
	kube, hp, err := clients(f.kubeconfig, &f.o.Fleet)
	if err != nil {
		return err
	}
	res, runErr := Run(ctx, kube, hp, f.o)
	if f.out != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.out, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write the result: %w", err)
		}
	}
	if runErr != nil {
		return runErr
	}
	return Report(c.stdout, res)
}

// clients returns the benchmark's clients of the cluster of kubeconfig,
// not rate limited (the benchmark's own client must never be what limits
// the figures), and sets the fleet's API server and its CA from it.
func clients(kubeconfig string, o *fleet.Options) (kubernetes.Interface, hostpathclient.Interface, error) {
	cfg, err := component.RESTConfig(kubeconfig, 1000, 2000, "hostpath-benchfleet")
	if err != nil {
		return nil, nil, err
	}
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", kubeconfig, err)
	}
	cc := raw.Contexts[raw.CurrentContext]
	if cc == nil || raw.Clusters[cc.Cluster] == nil {
		return nil, nil, fmt.Errorf("%s: no cluster in the current context %q", kubeconfig, raw.CurrentContext)
	}
	cl := raw.Clusters[cc.Cluster]
	o.Server, o.CAData = cl.Server, cl.CertificateAuthorityData
	if len(o.CAData) == 0 && cl.CertificateAuthority != "" {
		if o.CAData, err = os.ReadFile(cl.CertificateAuthority); err != nil {
			return nil, nil, fmt.Errorf("read the cluster's CA: %w", err)
		}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	hp, err := hostpathclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, hp, nil
}

func (c command) report(_ context.Context, argv []string) error {
	if len(argv) != 1 {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("usage: foreign-report RESULT.json")}
	}
	b, err := os.ReadFile(argv[0])
	if err != nil {
		return err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	return Report(c.stdout, res)
}
