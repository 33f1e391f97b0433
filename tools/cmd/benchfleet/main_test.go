package main

import (
	"io"
	"slices"
	"testing"

	"hostpath.dev/tools/internal/benchfleet"
	"hostpath.dev/tools/internal/fleet/foreign"
)

// TestCommands checks that the foreign phase's subcommands add to
// benchfleet's and replace none.
func TestCommands(t *testing.T) {
	own, phase := benchfleet.Commands(io.Discard, io.Discard), foreign.Commands(io.Discard, io.Discard)
	for name := range phase {
		if _, ok := own[name]; ok {
			t.Errorf("the foreign phase's subcommand %q replaces benchfleet's", name)
		}
	}
	var names []string
	for name := range commands(io.Discard, io.Discard) {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"foreign", "foreign-report", "report", "run"}; !slices.Equal(names, want) {
		t.Errorf("subcommands %v, want %v", names, want)
	}
}
