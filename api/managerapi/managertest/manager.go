package managertest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"hostpath.dev/api/managerapi"
)

// node is the state of one manager.
type node struct {
	host  managerapi.Host
	pools map[string]*pool
	// poolRoot, when set, is the pool PreparePool makes of a name it does
	// not have (a manager with --pool-root).
	poolRoot *managerapi.Pool
	// cloneSteps is how many clone calls answer a copy in progress before
	// one finds it done.
	cloneSteps int
}

// pool is one pool of a manager and its volumes, by name.
type pool struct {
	info    managerapi.Pool
	volumes map[string]*managerapi.Volume
}

// Manager is the fake manager of one node. It has the call methods of
// *managerapi.Client, and methods that set up what it holds. Its methods
// are safe for concurrent use.
type Manager struct {
	f    *Fake
	node string
}

var _ interface {
	Host(context.Context) (*managerapi.Host, error)
	PreparePool(context.Context, string) (*managerapi.Pool, error)
	ListVolumes(context.Context, string) (*managerapi.VolumeList, error)
	ListVolumesPage(context.Context, string, managerapi.ListOptions) (*managerapi.VolumeList, error)
	GetVolume(context.Context, string, string) (*managerapi.Volume, error)
	CreateVolume(context.Context, string, string, managerapi.CreateVolumeRequest) (*managerapi.Volume, error)
	CloneVolume(context.Context, string, string, managerapi.CloneVolumeRequest) (*managerapi.Clone, error)
	SetOwner(context.Context, string, string, managerapi.SetOwnerRequest) (*managerapi.Volume, error)
	SetSize(context.Context, string, string, managerapi.SetSizeRequest) (*managerapi.Volume, error)
	DeleteVolume(context.Context, string, string, managerapi.DeleteOptions) error
} = (*Manager)(nil)

// NodeName returns the manager's node.
func (m *Manager) NodeName() string { return m.node }

// Calls returns the calls made so far to this manager, in order.
func (m *Manager) Calls() []Call {
	var out []Call
	for _, c := range m.f.Calls() {
		if c.Node == m.node {
			out = append(out, c)
		}
	}
	return out
}

// state runs fn on the manager's state under the Fake's lock.
func (m *Manager) state(fn func(n *node)) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	fn(m.f.node(m.node))
}

// UpdateHost changes what Host answers besides the pools (the identity of
// the node: HostID, MachineID, BootID, ...); the pools it lists are the
// manager's own.
func (m *Manager) UpdateHost(fn func(h *managerapi.Host)) {
	m.state(func(n *node) { fn(&n.host) })
}

// AddPool adds the pool p (or replaces what the manager says of it,
// keeping its volumes). A pool without a Path gets /var/hostpath/<name>.
func (m *Manager) AddPool(p managerapi.Pool) {
	m.state(func(n *node) { n.addPool(p) })
}

// addPool adds p, or replaces the pool of that name keeping its volumes.
func (n *node) addPool(p managerapi.Pool) *pool {
	if p.Path == "" {
		p.Path = "/var/hostpath/" + p.Name
	}
	if old, ok := n.pools[p.Name]; ok {
		old.info = p
		return old
	}
	np := &pool{info: p, volumes: map[string]*managerapi.Volume{}}
	n.pools[p.Name] = np
	return np
}

// Pools returns the manager's pools, sorted by name, as Host lists them
// (without recording a call).
func (m *Manager) Pools() []managerapi.Pool {
	var out []managerapi.Pool
	m.state(func(n *node) { out = n.poolInfos() })
	return out
}

// UpdatePool changes what the manager says of pool name; it reports
// false, changing nothing, when the manager has no such pool.
func (m *Manager) UpdatePool(name string, fn func(p *managerapi.Pool)) bool {
	found := false
	m.state(func(n *node) {
		if p, ok := n.pools[name]; ok {
			fn(&p.info)
			p.info.Name, found = name, true
		}
	})
	return found
}

// RemovePool removes the pool name and its volumes: calls on it answer
// PoolNotFound, as a pool not configured or not mounted does.
func (m *Manager) RemovePool(name string) {
	m.state(func(n *node) { delete(n.pools, name) })
}

// PoolRoot makes PreparePool make the pools the manager does not have,
// from template (its Name and Path set), as a manager with --pool-root
// names pools on the fly; without it such a pool is PoolNotFound.
func (m *Manager) PoolRoot(template managerapi.Pool) {
	m.state(func(n *node) { n.poolRoot = &template })
}

// AddVolume adds the volume v to its pool v.Pool (added too when the
// manager does not have it), or replaces the volume of that name. A v
// without a Path gets its pool's path and name, one without a Mode 0777,
// one without an Enforcement its pool's. An Owner "" is a directory
// without an owner record.
func (m *Manager) AddVolume(v managerapi.Volume) {
	m.state(func(n *node) {
		p, ok := n.pools[v.Pool]
		if !ok {
			p = n.addPool(managerapi.Pool{Name: v.Pool})
		}
		if v.Path == "" {
			v.Path = p.info.Path + "/" + v.Name
		}
		if v.Mode == "" {
			v.Mode = managerapi.FormatMode(managerapi.DefaultMode)
		}
		if v.Enforcement == "" {
			v.Enforcement = p.info.Enforcement
		}
		p.volumes[v.Name] = copyVolume(&v)
	})
}

// Volume returns the volume name of pool, and false when there is none.
func (m *Manager) Volume(pool, name string) (managerapi.Volume, bool) {
	var v *managerapi.Volume
	m.state(func(n *node) {
		if p, ok := n.pools[pool]; ok {
			if found, ok := p.volumes[name]; ok {
				v = copyVolume(found)
			}
		}
	})
	if v == nil {
		return managerapi.Volume{}, false
	}
	return *v, true
}

// Volumes returns the volumes of pool, sorted by name (none when the
// manager does not have the pool).
func (m *Manager) Volumes(pool string) []managerapi.Volume {
	var out []managerapi.Volume
	m.state(func(n *node) {
		if p, ok := n.pools[pool]; ok {
			out = p.sorted("", 0)
		}
	})
	return out
}

// UpdateVolume changes the volume name of pool; it reports false,
// changing nothing, when there is none.
func (m *Manager) UpdateVolume(pool, name string, fn func(v *managerapi.Volume)) bool {
	found := false
	m.state(func(n *node) {
		if p, ok := n.pools[pool]; ok {
			if v, ok := p.volumes[name]; ok {
				fn(v)
				found = true
			}
		}
	})
	return found
}

// RemoveVolume removes the volume name of pool, if any.
func (m *Manager) RemoveVolume(pool, name string) {
	m.state(func(n *node) {
		if p, ok := n.pools[pool]; ok {
			delete(p.volumes, name)
		}
	})
}

// CloneSteps makes the next n CloneVolume calls that would make a volume
// answer its copy in progress (CloneCopying, CopiedBytes growing towards
// TotalBytes 100) instead; the call after them makes it and answers
// CloneDone.
func (m *Manager) CloneSteps(n int) {
	m.state(func(s *node) { s.cloneSteps = n })
}

// copyVolume returns a copy of v that shares nothing with it.
func copyVolume(v *managerapi.Volume) *managerapi.Volume {
	c := *v
	if v.UsedBytes != nil {
		c.UsedBytes = new(*v.UsedBytes)
	}
	if v.UsedInodes != nil {
		c.UsedInodes = new(*v.UsedInodes)
	}
	if v.OwnedSince != nil {
		c.OwnedSince = new(*v.OwnedSince)
	}
	return &c
}

// sorted returns copies of the pool's volumes whose names sort after
// after, sorted by name, at most limit of them (0: all).
func (p *pool) sorted(after string, limit int) []managerapi.Volume {
	out := []managerapi.Volume{}
	for _, name := range slices.Sorted(maps.Keys(p.volumes)) {
		if name <= after {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, *copyVolume(p.volumes[name]))
	}
	return out
}

// answer records c, made to m, and answers it: with the scripted error
// that matches it, else with fn over m's state, under the Fake's lock.
func answer[T any](m *Manager, c Call, fn func(n *node) (T, error)) (T, error) {
	c.Node = m.node
	if err := m.f.begin(c); err != nil {
		var none T
		return none, err
	}
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	return fn(m.f.node(m.node))
}

// wrap returns the manager's answer e of call c as the client returns it:
// "METHOD /path: manager answered ...".
func wrap(c Call, e *managerapi.Error) error {
	method, path := http.MethodGet, "/v1/host"
	if c.Pool != "" {
		path = "/v1/pools/" + url.PathEscape(c.Pool)
	}
	switch c.Method {
	case PreparePool:
		method = http.MethodPut
	case ListVolumes, ListVolumesPage:
		path += "/volumes"
	case GetVolume:
		path += "/volumes/" + url.PathEscape(c.Name)
	case CreateVolume:
		method, path = http.MethodPut, path+"/volumes/"+url.PathEscape(c.Name)
	case CloneVolume:
		method, path = http.MethodPut, path+"/volumes/"+url.PathEscape(c.Name)+"/clone"
	case SetOwner:
		method, path = http.MethodPut, path+"/volumes/"+url.PathEscape(c.Name)+"/owner"
	case SetSize:
		method, path = http.MethodPut, path+"/volumes/"+url.PathEscape(c.Name)+"/size"
	case DeleteVolume:
		method, path = http.MethodDelete, path+"/volumes/"+url.PathEscape(c.Name)
	}
	return fmt.Errorf("%s %s: %w", method, path, e)
}

// pool returns the pool c names, or the PoolNotFound answer to c.
func (n *node) pool(c Call) (*pool, error) {
	p, ok := n.pools[c.Pool]
	if !ok {
		return nil, wrap(c, managerapi.Errorf(managerapi.ReasonPoolNotFound, "pool %q is not configured on node %q", c.Pool, n.host.NodeName))
	}
	return p, nil
}

// volume returns the pool and the volume c names, or the PoolNotFound or
// NotFound answer to c.
func (n *node) volume(c Call) (*pool, *managerapi.Volume, error) {
	p, err := n.pool(c)
	if err != nil {
		return nil, nil, err
	}
	v, ok := p.volumes[c.Name]
	if !ok {
		return p, nil, wrap(c, managerapi.Errorf(managerapi.ReasonNotFound, "volume %q not found in pool %q", c.Name, c.Pool))
	}
	return p, v, nil
}

// ownerConflict is the OwnerConflict answer to c about v, whose owner is
// not want.
func ownerConflict(c Call, v *managerapi.Volume, want string) error {
	var e *managerapi.Error
	if v.Owner == "" {
		e = managerapi.Errorf(managerapi.ReasonOwnerConflict, "directory %q in pool %q has no owner record, not one naming %q", v.Name, v.Pool, want)
	} else {
		e = managerapi.Errorf(managerapi.ReasonOwnerConflict, "directory %q in pool %q belongs to PersistentVolume %q, not %q", v.Name, v.Pool, v.Owner, want)
	}
	e.Owner = v.Owner
	return wrap(c, e)
}
