package docscheck

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"hostpath.dev/e2e/framework/cli"
)

// Usage is the usage line of the check subcommand.
const Usage = "check [-bin DIR] [-pending FILE]... [ROOT]"

// options are the flags of the check subcommand.
type options struct {
	bin     string
	pending pendingFlag
}

// pendingFlag collects -pending, repeatable.
type pendingFlag []string

func (p *pendingFlag) String() string { return strings.Join(*p, ",") }

func (p *pendingFlag) Set(v string) error {
	*p = append(*p, filepath.ToSlash(filepath.Clean(v)))
	return nil
}

func (o *options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.bin, "bin", "", "Directory of the programs' binaries (default ROOT/bin).")
	fs.Var(&o.pending, "pending", "A page, relative to ROOT, that links may name before it exists; repeatable.")
}

func (o *options) Complete() error { return nil }

// Command returns the check subcommand for cli.Main: it runs Check and
// prints "docscheck: ok" to stdout, or fails listing every problem.
func Command(stdout, stderr io.Writer) cli.Command {
	return func(_ context.Context, args []string) error {
		var o options
		args, err := cli.ParseFlags("docscheck check", stderr, &o, args)
		if err != nil {
			return err
		}
		if len(args) > 1 {
			return errors.New("usage: docscheck " + Usage)
		}
		root := "."
		if len(args) == 1 {
			root = args[0]
		}
		if o.bin == "" {
			o.bin = filepath.Join(root, "bin")
		}
		problems, err := Check(root, o.bin, o.pending)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("%d problem(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
		}
		_, err = fmt.Fprintln(stdout, "docscheck: ok (flags of every program on its page, links, README length)")
		return err
	}
}
