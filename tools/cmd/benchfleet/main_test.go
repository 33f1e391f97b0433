package main

import (
	"io"
	"slices"
	"testing"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/benchfleet"
	"hostpath.dev/tools/internal/fleet/foreign"
	"hostpath.dev/tools/internal/fleet/nodecost"
)

// TestCommands checks that the foreign phase's and node-cost's
// subcommands add to benchfleet's and replace none.
func TestCommands(t *testing.T) {
	own := benchfleet.Commands(io.Discard, io.Discard)
	for _, other := range []map[string]cli.Command{foreign.Commands(io.Discard, io.Discard), nodecost.Commands(io.Discard, io.Discard)} {
		for name := range other {
			if _, ok := own[name]; ok {
				t.Errorf("subcommand %q replaces benchfleet's", name)
			}
			own[name] = other[name]
		}
	}
	var names []string
	for name := range commands(io.Discard, io.Discard) {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"foreign", "foreign-report", "node-cost", "node-cost-report", "report", "run"}; !slices.Equal(names, want) {
		t.Errorf("subcommands %v, want %v", names, want)
	}
}
