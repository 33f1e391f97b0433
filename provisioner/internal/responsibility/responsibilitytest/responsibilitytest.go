// Package responsibilitytest has a fake of responsibility.Instances for the
// tests of every package that asks the rule.
package responsibilitytest

import (
	"slices"

	"hostpath.dev/provisioner/internal/responsibility"
)

// Instances are instances in which this one wins every election or none,
// running on the nodes of On.
type Instances struct {
	// Wins says that this instance is elected for every key; else for
	// none.
	Wins bool
	// On are the nodes an instance runs on.
	On []string
	// Err, when set, is the answer to every question.
	Err error
}

var _ responsibility.Instances = Instances{}

// Elected reports i.Wins, or fails with i.Err.
func (i Instances) Elected(string) (bool, error) { return i.Wins && i.Err == nil, i.Err }

// OnNode reports whether node is one of i.On, or fails with i.Err.
func (i Instances) OnNode(node string) (bool, error) {
	return slices.Contains(i.On, node) && i.Err == nil, i.Err
}
