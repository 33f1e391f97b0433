// Command docscheck checks the documentation against the programs, for
// make verify (e2e/internal/docscheck):
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
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"hostpath.dev/e2e/internal/cli"
	"hostpath.dev/e2e/internal/docscheck"
)

func main() {
	cli.Main("docscheck", "check [-bin DIR] [-pending FILE]... [ROOT]", map[string]cli.Command{"check": check})
}

// options are the flags of check.
type options struct {
	bin     string
	pending pending
}

type pending []string

func (p *pending) String() string { return strings.Join(*p, ",") }
func (p *pending) Set(v string) error {
	*p = append(*p, filepath.ToSlash(filepath.Clean(v)))
	return nil
}

func (o *options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.bin, "bin", "", "Directory of the programs' binaries (default ROOT/bin).")
	fs.Var(&o.pending, "pending", "A page, relative to ROOT, that links may name before it exists; repeatable.")
}

func (o *options) Complete() error { return nil }

func check(_ context.Context, args []string) error {
	var o options
	args, err := cli.ParseFlags("docscheck check", os.Stderr, &o, args)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		return errors.New("usage: docscheck check [-bin DIR] [-pending FILE]... [ROOT]")
	}
	root := "."
	if len(args) == 1 {
		root = args[0]
	}
	if o.bin == "" {
		o.bin = filepath.Join(root, "bin")
	}
	problems, err := docscheck.Check(root, o.bin, o.pending)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	fmt.Println("docscheck: ok (flags of every program on its page, links, README length)")
	return nil
}
