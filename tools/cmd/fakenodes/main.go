// Command fakenodes adds lightweight fake nodes to the local cluster and keeps
// them Ready by renewing their Leases (scripts/fake-nodes.sh runs it):
//
//	fakenodes --count 100 [--prefix hostpath-fake-] [--renew-interval 10s] [--no-taint]
//	    create (or adopt) the nodes, print "ready" to stdout, renew until SIGTERM
//	fakenodes --delete
//	    delete every fake node and its Lease
//
// The flags and the program live in tools/internal/fakenodes (Command).
package main

import (
	"os"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/tools/internal/fakenodes"
)

func main() {
	component.Main("fakenodes", fakenodes.NewCommand(os.Stdout))
}
