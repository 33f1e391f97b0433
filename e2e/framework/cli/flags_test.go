package cli

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"testing"
	"time"
)

type testFlags struct {
	n        int
	complete error
	done     bool
}

func (f *testFlags) AddFlags(fs *flag.FlagSet) { fs.IntVar(&f.n, "n", 1, "a number") }

func (f *testFlags) Complete() error { f.done = true; return f.complete }

func TestParseFlags(t *testing.T) {
	var f testFlags
	rest, err := ParseFlags("x", &bytes.Buffer{}, &f, []string{"-n", "3", "a", "b"})
	if err != nil || f.n != 3 || !f.done || !slices.Equal(rest, []string{"a", "b"}) {
		t.Errorf("ParseFlags = %v, %v; n %d, completed %v", rest, err, f.n, f.done)
	}
	bad := errors.New("bad")
	f = testFlags{complete: bad}
	if _, err := ParseFlags("x", &bytes.Buffer{}, &f, nil); !errors.Is(err, bad) {
		t.Errorf("Complete's error = %v, want %v", err, bad)
	}
}

func TestLogf(t *testing.T) {
	var buf bytes.Buffer
	Logf(&buf, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })("%d of %s", 2, "x")
	if got, want := buf.String(), "[03:04:05] 2 of x\n"; got != want {
		t.Errorf("Logf printed %q, want %q", got, want)
	}
}

// TestPrintf: a set Printf prints through its function, an unset one
// prints nothing and does not panic.
func TestPrintf(t *testing.T) {
	var buf bytes.Buffer
	Logf(&buf, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }).Printf("%d of %s", 2, "x")
	if got, want := buf.String(), "[03:04:05] 2 of x\n"; got != want {
		t.Errorf("Printf printed %q, want %q", got, want)
	}
	var unset Printf
	unset.Printf("%d", 1)
}
