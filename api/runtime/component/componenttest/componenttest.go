// Package componenttest helps the tests of a hostpath program's options
// (the AddFlags and Validate of a component.Program): it parses a command
// line into them and checks what Validate reports, so that every program's
// option tests do it one way.
package componenttest

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Options are a program's options as the tests parse them: they bind
// their flags and check them (component.Program without Run).
type Options interface {
	// AddFlags binds the options to fs.
	AddFlags(fs *pflag.FlagSet)
	// Validate reports every option that cannot work.
	Validate() error
}

// Parse binds o's flags to a new flag set and parses args into them; an
// args error fails the test.
func Parse(t testing.TB, o interface{ AddFlags(fs *pflag.FlagSet) }, args ...string) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
}

// Validate parses args into o (Parse) and returns o.Validate().
func Validate(t testing.TB, o Options, args ...string) error {
	t.Helper()
	Parse(t, o, args...)
	return o.Validate()
}

// CheckErrs checks that err, what Validate returned, is nil when want is
// empty, else an error whose message contains every part of want.
func CheckErrs(t testing.TB, err error, want []string) {
	t.Helper()
	switch {
	case len(want) == 0 && err != nil:
		t.Fatalf("Validate() = %v, want nil", err)
	case len(want) == 0:
	case err == nil:
		t.Fatalf("Validate() = nil, want an error with %q", want)
	default:
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate() = %v, want it to contain %q", err, w)
			}
		}
	}
}
