package cli

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// Flags are a subcommand's flags: bound to a FlagSet, then completed (the
// flags given as text parsed into the subcommand's options) once parsed.
type Flags interface {
	AddFlags(fs *flag.FlagSet)
	Complete() error
}

// ParseFlags parses argv into f with a FlagSet named name that writes its
// usage and errors to stderr and exits 2 on a bad flag (flag.ExitOnError),
// then completes f. It returns the arguments after the flags.
func ParseFlags(name string, stderr io.Writer, f Flags, argv []string) ([]string, error) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.SetOutput(stderr)
	f.AddFlags(fs)
	_ = fs.Parse(argv)
	return fs.Args(), f.Complete()
}

// Printf prints a line of progress; a nil Printf prints nothing, so that
// a benchmark's options may leave it unset.
type Printf func(format string, a ...any)

// Printf prints through p, if it is set.
func (p Printf) Printf(format string, a ...any) {
	if p != nil {
		p(format, a...)
	}
}

// Logf returns a printf for progress: one line to w, after the time of day
// that now tells.
func Logf(w io.Writer, now func() time.Time) Printf {
	return func(format string, a ...any) {
		_, _ = fmt.Fprintf(w, "[%s] "+format+"\n", append([]any{now().Format("15:04:05")}, a...)...)
	}
}
