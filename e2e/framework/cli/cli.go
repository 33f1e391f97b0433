// Package cli is the shape of the commands made of subcommands, of e2e
// (nettool) and of tools (benchprovision, benchfleet, docscheck, ...): main
// names the subcommands, each runs with a context that SIGINT and SIGTERM
// end and returns its error, and Main reports it once and exits non-zero;
// ParseFlags and Logf are the flags and progress lines of a subcommand. The
// long-running klog programs (fakenodes) use component.Main instead. It
// needs nothing but the standard library, so that nettool stays a small
// static binary.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Command is one subcommand: it runs with the arguments after its name.
type Command func(ctx context.Context, args []string) error

// ExitError makes Main exit with Code instead of 1.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// Main runs the subcommand of commands named by the first argument. With no
// or an unknown subcommand it prints usage; when the subcommand fails it
// prints "name: error" to stderr and exits 1, or the ExitError's code.
func Main(name, usage string, commands map[string]Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, name, usage, commands, os.Args[1:])
	stop()
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	var exit *ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.Code)
	}
	os.Exit(1)
}

func run(ctx context.Context, name, usage string, commands map[string]Command, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: %s %s", name, usage)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("unknown command %q (%s); usage: %s %s", args[0], strings.Join(names, ", "), name, usage)
	}
	return cmd(ctx, args[1:])
}
