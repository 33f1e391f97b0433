// Command benchfleet measures hostpath over many nodes on one machine, on
// the running local cluster (scripts/bench-fleet.sh runs it; needs root):
//
//	benchfleet run --dir DIR --manager-bin M --provisioner-bin P [flags]
//	    starts a fleet of fake nodes, each with a manager and a provisioner
//	    process and their pod objects (tools/internal/fleet), measures node-mode
//	    claims over K instances, multihost latency over E managers and the
//	    backfill of a new node (tools/internal/benchfleet.Run), stops the fleet,
//	    and prints the report
//	benchfleet foreign --foreign N --foreign-instances K --dir DIR ... [flags]
//	    with a fleet of its own of K members, what each provisioner costs per
//	    node and per claim of another provisioner, N of them
//	    (tools/internal/fleet/foreign.Run), and prints the report
//	benchfleet node-cost --nodes 1000,5000 [flags]
//	    the real nodes' provisioners' memory with the objects of that many
//	    fake nodes, without processes (tools/internal/fleet/nodecost.Run)
//	benchfleet report | foreign-report | node-cost-report RESULT.json
//	    prints the report of a run's, a foreign phase's or a node-cost
//	    run's --out file
package main

import (
	"io"
	"maps"
	"os"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/benchfleet"
	"hostpath.dev/tools/internal/fleet/foreign"
	"hostpath.dev/tools/internal/fleet/nodecost"
)

func main() {
	cli.Main("benchfleet", benchfleet.Usage+" | "+foreign.Usage+" | "+nodecost.Usage, commands(os.Stdout, os.Stderr))
}

// commands are benchfleet's, the foreign phase's and node-cost's
// subcommands.
func commands(stdout, stderr io.Writer) map[string]cli.Command {
	cmds := benchfleet.Commands(stdout, stderr)
	maps.Copy(cmds, foreign.Commands(stdout, stderr))
	maps.Copy(cmds, nodecost.Commands(stdout, stderr))
	return cmds
}
