package benchprovision

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/framework/localcluster"
)

// Usage is the command line of benchprovision, for cli.Main.
const Usage = "run [flags] | report [flags] RESULT.json... | limits ARGS_JSON INSTANCES HELP_FILE"

// command holds where the subcommands write.
type command struct {
	stdout, stderr io.Writer
	now            func() time.Time
}

// Commands returns the subcommands of benchprovision for cli.Main: results
// go to stdout, progress and flag errors to stderr.
//
//	run [flags]: one Run; the Result as JSON to --out (default: stdout).
//	report [flags] RESULT.json...: Report the results (with footprints),
//	    WritePlots.
//	limits ARGS_JSON INSTANCES HELP_FILE: the Limits of INSTANCES
//	    provisioners running with the JSON array of arguments ARGS_JSON,
//	    the defaults read from HELP_FILE (the provisioner's --help).
func Commands(stdout, stderr io.Writer) map[string]cli.Command {
	c := command{stdout: stdout, stderr: stderr, now: time.Now}
	return map[string]cli.Command{"run": c.run, "report": c.report, "limits": c.limits}
}

// runFlags are the flags of "benchprovision run": the run's Options and what
// the command line gives as text.
type runFlags struct {
	o               Options
	kubeconfig, out string
	nodes, size     string
	// apiMetrics says to read the API server's /metrics before and after.
	apiMetrics bool
}

// AddFlags binds the flags of "benchprovision run" to fs.
func (f *runFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster (default: $KUBECONFIG).")
	fs.StringVar(&f.o.Label, "label", "run", "Name of the run in the results: KIND@SETTING, such as ours@200/400 or "+BaselineKind+"@200/400 (the baseline).")
	fs.StringVar(&f.o.Settings, "settings", "", "Provisioner configuration measured, for the table.")
	fs.StringVar(&f.o.KCM, "kcm", "", "kube-controller-manager's client limits during the run (QPS/BURST), for the table.")
	fs.BoolVar(&f.apiMetrics, "apiserver-metrics", true, "Count the API server's requests by verb and resource during the run (its /metrics before and after).")
	fs.StringVar(&f.o.RunID, "run-id", "", "Value of the label "+RunLabel+" on the namespace.")
	fs.IntVar(&f.o.Round, "round", 0, "Number of this run among the repeated runs of its label (1, 2, ...), each paired with the baseline's run of the same round; 0 for a single run.")
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
	if _, err := cli.ParseFlags("run", c.stderr, &f, argv); err != nil {
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
	if f.apiMetrics {
		f.o.APIMetrics = apimetrics.APIServerMetrics(client)
	}
	res, err := Run(ctx, client, f.o)
	if err != nil {
		return err
	}
	return c.writeResult(res, f.out)
}

// logf prints one line of progress to stderr, after the time of day.
func (c command) logf(format string, a ...any) {
	cli.Logf(c.stderr, c.now)(format, a...)
}

// writeResult writes res (a Result or a list of them) as indented JSON to
// the file out, or to stdout when out is empty.
func (c command) writeResult(res any, out string) error {
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

// reportFlags are the flags of "benchprovision report".
type reportFlags struct {
	// footprints are the footprint files by run label.
	footprints        labelFiles
	plots, json, kind string
}

// AddFlags binds the flags of "benchprovision report" to fs.
func (f *reportFlags) AddFlags(fs *flag.FlagSet) {
	f.footprints = labelFiles{}
	fs.Var(f.footprints, "footprint", "LABEL=FILE (LABEL#ROUND=FILE for a run of several rounds): the run's processes, in the table scripts/footprint.sh prints (repeat for each run).")
	fs.StringVar(&f.plots, "plots", "", "Folder to write the SVG plots into (created if needed); empty: none.")
	fs.StringVar(&f.json, "json", "", "File to write the results, footprints included, into as a JSON list; empty: none.")
	fs.StringVar(&f.kind, "baseline", BaselineKind, "KIND, in the run labels, of the baseline runs.")
}

// labelFiles is a repeated LABEL=FILE flag.
type labelFiles map[string]string

func (l labelFiles) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelFiles) Set(v string) error {
	label, file, ok := strings.Cut(v, "=")
	if !ok || label == "" || file == "" {
		return fmt.Errorf("want LABEL=FILE, got %q", v)
	}
	l[label] = file
	return nil
}

func (c command) report(_ context.Context, argv []string) error {
	var f reportFlags
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	fs.SetOutput(c.stderr)
	f.AddFlags(fs)
	_ = fs.Parse(argv)
	results, err := readResults(fs.Args(), f.footprints)
	if err != nil {
		return err
	}
	if err := Report(c.stdout, results, f.kind); err != nil {
		return err
	}
	if f.json != "" {
		if err := c.writeResult(results, f.json); err != nil {
			return err
		}
	}
	if f.plots == "" {
		return nil
	}
	files, err := WritePlots(f.plots, results)
	for _, file := range files {
		_, _ = fmt.Fprintf(c.stdout, "plot: %s\n", file)
	}
	return err
}

// readResults reads the Result files and puts into each the footprint
// file of its label.
func readResults(files []string, footprints labelFiles) ([]Result, error) {
	if len(files) == 0 {
		return nil, errors.New("usage: benchprovision report [flags] RESULT.json [RESULT.json...]")
	}
	results := make([]Result, len(files))
	used := map[string]bool{}
	for i, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &results[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		key := runKey(results[i])
		fpFile, ok := footprints[key]
		if !ok {
			continue
		}
		used[key] = true
		fp, err := readFootprint(fpFile)
		if err != nil {
			return nil, err
		}
		ApplyFootprint(&results[i], fp)
	}
	for label := range footprints {
		if !used[label] {
			return nil, fmt.Errorf("--footprint %s: no result has that label", label)
		}
	}
	return results, nil
}

// runKey names a run for --footprint: its label, and "#ROUND" when it is
// one of several rounds.
func runKey(r Result) string {
	if r.Round > 0 {
		return fmt.Sprintf("%s#%d", r.Label, r.Round)
	}
	return r.Label
}

func readFootprint(file string) (map[string]Footprint, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }()
	fp, err := ParseFootprint(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return fp, nil
}

// limitsInput is what "benchprovision limits" takes.
type limitsInput struct {
	args      []string
	instances int
	helpFile  string
}

// parseLimits checks and parses the arguments of "benchprovision limits".
func parseLimits(argv []string) (limitsInput, error) {
	var in limitsInput
	if len(argv) != 3 {
		return in, errors.New("usage: benchprovision limits ARGS_JSON INSTANCES HELP_FILE")
	}
	if strings.TrimSpace(argv[0]) != "" {
		if err := json.Unmarshal([]byte(argv[0]), &in.args); err != nil {
			return in, fmt.Errorf("args %q: %w", argv[0], err)
		}
	}
	n, err := strconv.Atoi(argv[1])
	if err != nil || n < 1 {
		return in, fmt.Errorf("bad number of instances %q", argv[1])
	}
	in.instances, in.helpFile = n, argv[2]
	return in, nil
}

func (c command) limits(_ context.Context, argv []string) error {
	in, err := parseLimits(argv)
	if err != nil {
		return err
	}
	help, err := os.Open(in.helpFile)
	if err != nil {
		return err
	}
	defer func() { _ = help.Close() }()
	defaults, err := FlagDefaults(help)
	if err != nil {
		return fmt.Errorf("%s: %w", in.helpFile, err)
	}
	l, err := InstanceLimits(in.args, defaults)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, l.Times(in.instances))
	return err
}
