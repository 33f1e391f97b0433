// Command docscheck checks the documentation against the programs, for
// make verify (tools/internal/docscheck):
//
//	docscheck check [-bin DIR] [-pending FILE]... [ROOT]
//	    every flag of each program's --help (binaries in DIR, default
//	    ROOT/bin, as make build leaves them) is on its docs/ page; every
//	    relative link of README.md and docs/ leads somewhere (-pending: a
//	    page another branch adds, which may not exist yet); README.md has
//	    at most 300 lines. ROOT is the repository's root (default: the
//	    working directory)
package main

import (
	"os"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/docscheck"
)

func main() {
	cli.Main("docscheck", docscheck.Usage, map[string]cli.Command{"check": docscheck.Command(os.Stdout, os.Stderr)})
}
