// Command benchfleet measures hostpath over many nodes on one machine, on
// the running local cluster (scripts/bench-fleet.sh runs it; needs root):
//
//	benchfleet run --dir DIR --manager-bin M --provisioner-bin P [flags]
//	    starts a fleet of fake nodes, each with a manager and a provisioner
//	    process and their pod objects (e2e/internal/fleet), measures node-mode
//	    claims over K instances, multihost latency over E managers and the
//	    backfill of a new node (e2e/internal/benchfleet.Run), stops the fleet,
//	    and prints the report
//	benchfleet report RESULT.json
//	    prints the report of a run's --out file
package main

import (
	"os"

	"hostpath.dev/e2e/internal/benchfleet"
	"hostpath.dev/e2e/internal/cli"
)

func main() {
	cli.Main("benchfleet", benchfleet.Usage, benchfleet.Commands(os.Stdout, os.Stderr))
}
