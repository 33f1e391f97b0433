// Command benchprovision measures a provisioner's throughput on a running
// cluster against the no-op floor (scripts/bench-provision.sh runs it):
//
//	benchprovision run --label ours@200/400 --kcm 200/400 --count 1000 --out result.json [--nodes-dir .cluster/nodes]
//	    one run (tools/internal/benchprovision.Run): prints progress to stderr,
//	    writes the figures, timelines and API requests as JSON to --out
//	benchprovision report [--footprint LABEL=FILE]... [--plots DIR] [--json FILE] RESULT.json...
//	    prints each run against the noop run of its setting, writes the plots
//	benchprovision limits ARGS_JSON INSTANCES HELP_FILE
//	    prints "QPS BURST WORKERS" of INSTANCES provisioners run with the
//	    arguments ARGS_JSON, the defaults read from their --help in HELP_FILE
//
// The subcommands and their flags live in tools/internal/benchprovision
// (Commands).
package main

import (
	"os"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/benchprovision"
)

func main() {
	cli.Main("benchprovision", benchprovision.Usage, benchprovision.Commands(os.Stdout, os.Stderr))
}
