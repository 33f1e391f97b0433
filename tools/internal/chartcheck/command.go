package chartcheck

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"hostpath.dev/e2e/framework/cli"
)

// Usage is the usage line of the chartcheck command.
const Usage = "check -helm PATH -helm4 PATH -kustomize PATH [-kube-version V] [ROOT] | sync [ROOT]"

// flags binds Options to the subcommands' flags.
type flags struct{ o *Options }

func (f flags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.o.Helm, "helm", "", "Path of the helm v3 binary (scripts/tool.sh helm).")
	fs.StringVar(&f.o.Helm4, "helm4", "", "Path of the helm v4 binary (scripts/tool.sh helm4).")
	fs.StringVar(&f.o.Kustomize, "kustomize", "", "Path of the kustomize v5 binary (scripts/tool.sh kustomize).")
	fs.StringVar(&f.o.KubeVersion, "kube-version", "", "Kubernetes version helm renders for (default: K8S_VERSION of scripts/lib.sh).")
}

func (f flags) Complete() error { return nil }

// parse reads a subcommand's flags and its ROOT argument (default: the
// working directory) into Options.
func parse(name string, stderr io.Writer, args []string) (Options, error) {
	var o Options
	args, err := cli.ParseFlags("chartcheck "+name, stderr, flags{&o}, args)
	if err != nil {
		return o, err
	}
	if len(args) > 1 {
		return o, errors.New("usage: chartcheck " + Usage)
	}
	o.Root = "."
	if len(args) == 1 {
		o.Root = args[0]
	}
	return o, nil
}

// CheckCommand returns the check subcommand for cli.Main: it runs Check
// and prints "chartcheck: ok" to stdout, or fails listing every problem.
func CheckCommand(stdout, stderr io.Writer) cli.Command {
	return func(ctx context.Context, args []string) error {
		o, err := parse("check", stderr, args)
		if err != nil {
			return err
		}
		problems, err := Check(ctx, o)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("%d problem(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
		}
		_, err = fmt.Fprintf(stdout, "chartcheck: ok (%s copies of %s, helm lint, %d cases rendered as the manifests, helm v4 as v3, values table)\n", FilesDir, ManifestsDir, len(Cases))
		return err
	}
}

// SyncCommand returns the sync subcommand for cli.Main: it runs Sync and
// prints the files it rewrote.
func SyncCommand(stdout, stderr io.Writer) cli.Command {
	return func(_ context.Context, args []string) error {
		o, err := parse("sync", stderr, args)
		if err != nil {
			return err
		}
		changed, err := Sync(o.Root)
		for _, f := range changed {
			if _, werr := fmt.Fprintf(stdout, "chartcheck: rewrote %s\n", f); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
		if len(changed) == 0 {
			_, err = fmt.Fprintln(stdout, "chartcheck: nothing to rewrite")
		}
		return err
	}
}
