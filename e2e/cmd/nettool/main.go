// Command nettool is the network helper of the testtools image:
//
//	nettool serve ADDR TEXT
//	    serve TEXT on every path of http://ADDR
//	nettool get [--token-file F] [--ca-file F] [--retry-for D] [--timeout D] URL
//	    print "STATUS <code>" and the body; exit 0 on a 2xx answer, 2 on
//	    another status, 1 if no answer came
//	nettool flood [--requests N] [--concurrency C] [--qps Q] [--token-file F | --junk-tokens]
//	        [--cycle N] [--insecure | --ca-file F] [--timeout D] URL
//	    send N GETs to URL ("{i}" in it is the request index, modulo --cycle)
//	    and print one line of JSON: requests, count per status (0 for no
//	    answer), latency percentiles; exit 0 whatever the statuses
//
// The subcommands live in e2e/internal/nettool (Commands); it needs nothing
// but the standard library and golang.org/x/time/rate, so the binary stays
// small and static.
package main

import (
	"os"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/internal/nettool"
)

func main() {
	cli.Main("nettool", nettool.Usage, nettool.Commands(os.Stdout, os.Stderr))
}
