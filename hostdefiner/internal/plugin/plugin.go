// Package plugin is the command line of kubectl-hostpath, the kubectl
// plugin of hostpath (`kubectl hostpath COMMAND`, once kubectl-hostpath is
// on PATH): it picks the command, parses its flags, validates and runs it,
// prints an error once, and turns the outcome into the exit status.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

// Exit statuses.
const (
	// ExitOK: the command ran and found nothing (or was asked for help).
	ExitOK = 0
	// ExitFound: the command ran and found something.
	ExitFound = 1
	// ExitError: a usage error, or the command failed.
	ExitError = 2
)

// Name is how users call the plugin.
const Name = "kubectl hostpath"

// Program is one command's options: flags, their check, and the run.
type Program interface {
	// AddFlags binds the options to fs.
	AddFlags(fs *pflag.FlagSet)
	// Validate reports every option that cannot work.
	Validate() error
	// Run runs the command, printing its result to out; found says the
	// command should exit ExitFound.
	Run(ctx context.Context, out io.Writer) (found bool, err error)
}

// Command is a command of the plugin.
type Command struct {
	// Name is the word after `kubectl hostpath`.
	Name string
	// Summary is one line for the list of commands; Help is printed
	// before the flags by --help.
	Summary, Help string
	// New returns the command's options with their defaults.
	New func() Program
}

// Main runs the command args name (args are the plugin's arguments, without
// the program name) and returns the exit status. Usage errors and failures
// go to stderr, once; help and results to stdout.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, commands ...Command) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout, commands)
		return ExitOK
	}
	var cmd *Command
	for i := range commands {
		if commands[i].Name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "Error: unknown command %q for %q\n", args[0], Name)
		usage(stderr, commands)
		return ExitError
	}
	p := cmd.New()
	fs := pflag.NewFlagSet(Name+" "+cmd.Name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	p.AddFlags(fs)
	err := fs.Parse(args[1:])
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprintf(stdout, "%s\n\nUsage:\n  %s %s [flags]\n\nFlags:\n%s", cmd.Help, Name, cmd.Name, fs.FlagUsages())
		return ExitOK
	case err != nil:
		fmt.Fprintf(stderr, "Error: %v\nSee '%s %s --help'.\n", err, Name, cmd.Name)
		return ExitError
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "Error: unexpected arguments %q\nSee '%s %s --help'.\n", fs.Args(), Name, cmd.Name)
		return ExitError
	}
	if err := p.Validate(); err != nil {
		fmt.Fprintf(stderr, "Error: %s\nSee '%s %s --help'.\n", strings.ReplaceAll(err.Error(), "\n", "\n  "), Name, cmd.Name)
		return ExitError
	}
	found, err := p.Run(ctx, stdout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return ExitError
	case found:
		return ExitFound
	}
	return ExitOK
}

// usage lists the commands.
func usage(w io.Writer, commands []Command) {
	fmt.Fprintf(w, "The kubectl plugin of hostpath.\n\nUsage:\n  %s COMMAND [flags]\n\nCommands:\n", Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's flags.\n", Name)
}
