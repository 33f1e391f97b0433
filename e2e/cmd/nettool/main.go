// Command nettool is the network helper of the testtools image:
//
//	nettool serve ADDR TEXT
//	    serve TEXT on every path of http://ADDR
//	nettool get [--token-file F] [--ca-file F] [--retry-for D] [--timeout D] URL
//	    print "STATUS <code>" and the body; exit 0 on a 2xx answer, 2 on
//	    another status, 1 if no answer came
//
// The subcommands live in e2e/internal/nettool (Commands); it needs nothing
// but the standard library, so the binary stays small and static.
package main

import (
	"os"

	"hostpath.dev/e2e/internal/cli"
	"hostpath.dev/e2e/internal/nettool"
)

func main() {
	cli.Main("nettool", nettool.Usage, nettool.Commands(os.Stdout, os.Stderr))
}
