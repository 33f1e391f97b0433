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
//
// The subcommands and their flags live in e2e/internal/benchprovision
// (Commands).
package main

import (
	"os"

	"hostpath.dev/e2e/internal/benchprovision"
	"hostpath.dev/e2e/internal/cli"
)

func main() {
	cli.Main("benchprovision", benchprovision.Usage, benchprovision.Commands(os.Stdout, os.Stderr))
}
