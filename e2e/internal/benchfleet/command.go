package benchfleet

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	hostpathclient "hostpath.dev/hostdefiner/pkg/generated/clientset/versioned"

	"hostpath.dev/e2e/internal/cli"
	"hostpath.dev/e2e/internal/fleet"
	"hostpath.dev/manager/pkg/runtime/component"
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
	return map[string]cli.Command{"run": c.run, "report": c.report}
}

// runFlags are the flags of "benchfleet run".
type runFlags struct {
	o                                Options
	kubeconfig, out                  string
	provisionerArgs, instances, ends string
}

// AddFlags binds the flags of "benchfleet run" to fs.
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
	fs.StringVar(&f.instances, "instances", "10:1000,100:200", "Instance runs, as K:N pairs (N claims over K instances), comma-separated; empty for none.")
	fs.StringVar(&f.o.NodeClass, "node-class", "hostpath-immediate", "Node-mode StorageClass of the instance runs (Immediate).")
	fs.StringVar(&f.ends, "endpoints", "10,50,100", "Multihost pool sizes (managers, the real nodes' included), comma-separated; empty for none.")
	fs.IntVar(&f.o.MultihostClaims, "multihost-claims", 10, "Multihost claims per pool size, one at a time.")
	fs.StringVar(&f.o.MultihostClass, "multihost-class", "hostpath-shared", "Multihost StorageClass (Immediate).")
	fs.IntVar(&f.o.Backfill, "backfill", 1000, "Multihost volumes a new node gets; 0 for no backfill step.")
	fs.StringVar(&f.o.Pool, "pool", "default", "Pool of the classes.")
	fs.DurationVar(&f.o.Timeout, "timeout", 15*time.Minute, "Bound of each wait.")
	fs.StringVar(&f.out, "out", "", "File for the result as JSON (default: none).")
}

// Complete parses the text flags into the Options.
func (f *runFlags) Complete() error {
	if err := json.Unmarshal([]byte(f.provisionerArgs), &f.o.Fleet.ProvisionerArgs); err != nil {
		return fmt.Errorf("--provisioner-args: %w", err)
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
	// The benchmark's own client must never be what limits the figures.
	cfg, err := component.RESTConfig(f.kubeconfig, 1000, 2000, "hostpath-benchfleet")
	if err != nil {
		return err
	}
	raw, err := clientcmd.LoadFromFile(f.kubeconfig)
	if err != nil {
		return err
	}
	for _, cl := range raw.Clusters {
		f.o.Fleet.Server, f.o.Fleet.CAData = cl.Server, cl.CertificateAuthorityData
		if len(cl.CertificateAuthorityData) == 0 && cl.CertificateAuthority != "" {
			if f.o.Fleet.CAData, err = os.ReadFile(cl.CertificateAuthority); err != nil {
				return err
			}
		}
		break
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hp, err := hostpathclient.NewForConfig(cfg)
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
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	return Report(c.stdout, res)
}

func (c command) report(_ context.Context, argv []string) error {
	if len(argv) != 1 {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("usage: report RESULT.json")}
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
