package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/kubernetes"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"

	"hostpath.dev/e2e/framework/cli"
)

// RunAndReport is what a benchmark's run subcommand does once its flags
// are parsed: it makes the clients of the cluster (f.Clients, which sets
// o's API server and CA: run, called after, sees them in o), runs run with
// them, writes its result to f.Out as JSON (also when run failed: what it
// measured) and, when run did not fail, prints report's of it to w.
func RunAndReport[R any](f *Flags, o *Options, w io.Writer,
	run func(kubernetes.Interface, hostpathclient.Interface) (R, error), report func(io.Writer, R) error,
) error {
	kube, hp, err := f.Clients(o)
	if err != nil {
		return err
	}
	res, runErr := run(kube, hp)
	if err := writeResult(f.Out, res); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	return report(w, res)
}

// ReportCommand returns a benchmark's report subcommand, whose command
// line is usage ("NAME RESULT.json"): it prints to w report's of the
// result that its run subcommand wrote to RESULT.json (RunAndReport).
// Other than one argument is an ExitError of code 2 that shows usage.
func ReportCommand[R any](w io.Writer, usage string, report func(io.Writer, R) error) cli.Command {
	return func(_ context.Context, argv []string) error {
		var res R
		if err := readResult(argv, usage, &res); err != nil {
			return err
		}
		return report(w, res)
	}
}

// writeResult writes res as indented JSON, with a final newline, to file;
// nothing for an empty file name.
func writeResult(file string, res any) error {
	if file == "" {
		return nil
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the result: %w", err)
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the result: %w", err)
	}
	return nil
}

// readResult reads into res the JSON file that is the one argument of a
// report subcommand whose command line is usage.
func readResult(argv []string, usage string, res any) error {
	if len(argv) != 1 {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("usage: %s", usage)}
	}
	b, err := os.ReadFile(argv[0])
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, res); err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	return nil
}
