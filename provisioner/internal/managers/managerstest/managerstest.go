// Package managerstest fakes, for tests only, what package managers
// answers the provisioner's other packages: the nodes of a pool
// (*managers.Resolver's Targets), as the host definer's HostDefinitions
// would make them.
package managerstest

// Targets is a fake of the TargetLister of the provisioner and reclaim
// packages (*managers.Resolver): fixed Ready and Pending nodes for the
// pool Pool and none for another, or for every pool when Pool is "".
type Targets struct {
	// Pool is the one pool of the nodes; "" for every pool.
	Pool string
	// Ready and Pending are what Targets returns.
	Ready, Pending []string
}

// Targets returns t.Ready and t.Pending for pool t.Pool (any pool when
// t.Pool is ""), none for another; never an error.
func (t Targets) Targets(pool string) (ready, pending []string, err error) {
	if t.Pool != "" && pool != t.Pool {
		return nil, nil, nil
	}
	return t.Ready, t.Pending, nil
}
