// Command benchprovision measures the hostpath provisioner's throughput on a
// running cluster (scripts/bench-provision.sh runs it):
//
//	benchprovision run --label L --settings S --count 100 --out result.json [--nodes-dir .cluster/nodes]
//	    one run (e2e/internal/benchprovision.Run): prints progress to stderr,
//	    writes the figures as JSON to --out
//	benchprovision compare A.json B.json
//	    prints the figures of both runs and the ratio A/B of each
//	benchprovision args ARGS_JSON [QPS BURST]
//	    prints the JSON array ARGS_JSON without --kube-api-qps/--kube-api-burst,
//	    with them set to QPS and BURST when given
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"hostpath.dev/e2e/internal/benchprovision"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: benchprovision run|compare|args ..."))
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx, os.Args[2:])
	case "compare":
		err = compare(os.Args[2:])
	case "args":
		err = args(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (run, compare, args)", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "benchprovision: %v\n", err)
	os.Exit(1)
}

func run(ctx context.Context, argv []string) error {
	o := benchprovision.Options{}
	var kubeconfig, out, nodes, size string
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster (default: $KUBECONFIG).")
	fs.StringVar(&o.Label, "label", "run", "Name of the run in the results.")
	fs.StringVar(&o.Settings, "settings", "", "Provisioner configuration measured, for the table.")
	fs.StringVar(&o.RunID, "run-id", "", "Value of the label "+benchprovision.RunLabel+" on the namespace.")
	fs.IntVar(&o.Count, "count", 100, "Number of claims.")
	fs.StringVar(&o.StorageClass, "storage-class", "hostpath-immediate", "StorageClass of the claims (Immediate binding).")
	fs.StringVar(&nodes, "nodes", "", "Comma-separated nodes to pin the claims to, round robin (default: every node not labelled "+benchprovision.FakeNodeLabel+"=true).")
	fs.StringVar(&size, "size", "1Mi", "Request of each claim.")
	fs.IntVar(&o.Workers, "workers", 16, "Parallel claim creators.")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "Bound of each wait (all PVs, all Bound, all gone, namespace gone).")
	fs.StringVar(&o.NodesDir, "nodes-dir", "", "Folder with each node's files on this machine (.cluster/nodes); empty: do not check directories.")
	fs.StringVar(&o.PoolPath, "pool-path", "/var/hpvolumes", "Path of the pool on the nodes.")
	fs.DurationVar(&o.Poll, "poll", 50*time.Millisecond, "How often directories are looked at while waiting.")
	fs.StringVar(&out, "out", "", "File for the result as JSON (default: stdout).")
	_ = fs.Parse(argv)
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	o.Size = q
	if nodes != "" {
		o.Nodes = strings.Split(nodes, ",")
	}
	o.Logf = func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "hostpath-benchprovision"
	// The benchmark's own client must never be what limits the figures.
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	res, err := benchprovision.Run(ctx, client, o)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if out == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

func compare(argv []string) error {
	if len(argv) != 2 {
		return fmt.Errorf("usage: benchprovision compare A.json B.json")
	}
	var rs [2]benchprovision.Result
	for i, f := range argv {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &rs[i]); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return benchprovision.Compare(os.Stdout, rs[0], rs[1])
}

func args(argv []string) error {
	if len(argv) != 1 && len(argv) != 3 {
		return fmt.Errorf("usage: benchprovision args ARGS_JSON [QPS BURST]")
	}
	var in []string
	if strings.TrimSpace(argv[0]) != "" {
		if err := json.Unmarshal([]byte(argv[0]), &in); err != nil {
			return fmt.Errorf("args %q: %w", argv[0], err)
		}
	}
	var qps float64
	var burst int
	if len(argv) == 3 {
		var err error
		if qps, err = strconv.ParseFloat(argv[1], 64); err != nil || qps <= 0 {
			return fmt.Errorf("bad QPS %q", argv[1])
		}
		if burst, err = strconv.Atoi(argv[2]); err != nil || burst < 1 {
			return fmt.Errorf("bad burst %q", argv[2])
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(benchprovision.WithRates(in, qps, burst))
}
