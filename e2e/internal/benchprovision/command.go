package benchprovision

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

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"hostpath.dev/e2e/internal/cli"
	"hostpath.dev/e2e/internal/localcluster"
	"hostpath.dev/manager/pkg/component"
)

// Usage is the command line of benchprovision, for cli.Main.
const Usage = "run [flags] | compare A.json B.json | args ARGS_JSON [QPS BURST]"

// command holds where the subcommands write.
type command struct {
	stdout, stderr io.Writer
	now            func() time.Time
}

// Commands returns the subcommands of benchprovision for cli.Main: results
// go to stdout, progress and flag errors to stderr.
//
//	run [flags]: one Run; the Result as JSON to --out (default: stdout).
//	compare A.json B.json: Compare the two Results.
//	args ARGS_JSON [QPS BURST]: the JSON array ARGS_JSON through WithRates.
func Commands(stdout, stderr io.Writer) map[string]cli.Command {
	c := command{stdout: stdout, stderr: stderr, now: time.Now}
	return map[string]cli.Command{"run": c.run, "compare": c.compare, "args": c.args}
}

// runFlags are the flags of "benchprovision run": the run's Options and what
// the command line gives as text.
type runFlags struct {
	o               Options
	kubeconfig, out string
	nodes, size     string
}

// AddFlags binds the flags of "benchprovision run" to fs.
func (f *runFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster (default: $KUBECONFIG).")
	fs.StringVar(&f.o.Label, "label", "run", "Name of the run in the results.")
	fs.StringVar(&f.o.Settings, "settings", "", "Provisioner configuration measured, for the table.")
	fs.StringVar(&f.o.RunID, "run-id", "", "Value of the label "+RunLabel+" on the namespace.")
	fs.IntVar(&f.o.Count, "count", 100, "Number of claims.")
	fs.StringVar(&f.o.StorageClass, "storage-class", "hostpath-immediate", "StorageClass of the claims (Immediate binding).")
	fs.StringVar(&f.nodes, "nodes", "", "Comma-separated nodes to pin the claims to, round robin (default: every node not labelled "+localcluster.FakeNodeLabel+"=true).")
	fs.StringVar(&f.size, "size", "1Mi", "Request of each claim.")
	fs.IntVar(&f.o.Workers, "workers", 16, "Parallel claim creators.")
	fs.DurationVar(&f.o.Timeout, "timeout", 10*time.Minute, "Bound of each wait (all PVs, all Bound, all gone, namespace gone).")
	fs.StringVar(&f.o.NodesDir, "nodes-dir", "", "Folder with each node's files on this machine (.cluster/nodes); empty: do not check directories.")
	fs.StringVar(&f.o.PoolPath, "pool-path", "/var/hpvolumes", "Path of the pool on the nodes.")
	fs.DurationVar(&f.o.Poll, "poll", 50*time.Millisecond, "How often directories are looked at while waiting.")
	fs.StringVar(&f.out, "out", "", "File for the result as JSON (default: stdout).")
}

// Complete parses --size and --nodes into the Options; Run checks the rest.
func (f *runFlags) Complete() error {
	q, err := resource.ParseQuantity(f.size)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	f.o.Size = q
	f.o.Nodes = nil
	if f.nodes != "" {
		f.o.Nodes = strings.Split(f.nodes, ",")
	}
	return nil
}

func (c command) run(ctx context.Context, argv []string) error {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.SetOutput(c.stderr)
	f.AddFlags(fs)
	_ = fs.Parse(argv)
	if err := f.Complete(); err != nil {
		return err
	}
	f.o.Logf = c.logf
	// The benchmark's own client must never be what limits the figures.
	cfg, err := component.RESTConfig(f.kubeconfig, 1000, 2000, "hostpath-benchprovision")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	res, err := Run(ctx, client, f.o)
	if err != nil {
		return err
	}
	return c.writeResult(res, f.out)
}

// logf prints one line of progress to stderr, after the time of day.
func (c command) logf(format string, a ...any) {
	_, _ = fmt.Fprintf(c.stderr, "[%s] "+format+"\n", append([]any{c.now().Format("15:04:05")}, a...)...)
}

// writeResult writes res as indented JSON to the file out, or to stdout
// when out is empty.
func (c command) writeResult(res Result, out string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if out == "" {
		_, err = c.stdout.Write(b)
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

func (c command) compare(_ context.Context, argv []string) error {
	if len(argv) != 2 {
		return fmt.Errorf("usage: benchprovision compare A.json B.json")
	}
	var rs [2]Result
	for i, f := range argv {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &rs[i]); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return Compare(c.stdout, rs[0], rs[1])
}

// argsInput is what "benchprovision args" takes: the provisioner arguments
// and, when qps > 0, the rates to set.
type argsInput struct {
	args  []string
	qps   float64
	burst int
}

// parseArgs checks and parses the arguments of "benchprovision args".
func parseArgs(argv []string) (argsInput, error) {
	var in argsInput
	if len(argv) != 1 && len(argv) != 3 {
		return in, fmt.Errorf("usage: benchprovision args ARGS_JSON [QPS BURST]")
	}
	if strings.TrimSpace(argv[0]) != "" {
		if err := json.Unmarshal([]byte(argv[0]), &in.args); err != nil {
			return in, fmt.Errorf("args %q: %w", argv[0], err)
		}
	}
	if len(argv) == 3 {
		var err error
		if in.qps, err = strconv.ParseFloat(argv[1], 64); err != nil || in.qps <= 0 {
			return in, fmt.Errorf("bad QPS %q", argv[1])
		}
		if in.burst, err = strconv.Atoi(argv[2]); err != nil || in.burst < 1 {
			return in, fmt.Errorf("bad burst %q", argv[2])
		}
	}
	return in, nil
}

func (c command) args(_ context.Context, argv []string) error {
	in, err := parseArgs(argv)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(WithRates(in.args, in.qps, in.burst))
}
