package managertest

import (
	"context"
	"errors"
	"maps"
	"slices"

	"hostpath.dev/api/managerapi"
)

// The call methods follow the manager's rules as docs/api.md and the
// managerapi types describe them, with what a test does not need left
// out: a Fake keeps no count of the space a pool has (a 507 is scripted
// with Fail), never finds a file where a directory should be, and
// confirms a repeated create of the same owner without comparing the rest
// of its request with the record (its caller compares the answer, see
// managerapi.CreateVolumeRequest.Differences).

// Host answers GET /v1/host: the host as UpdateHost set it, with the
// manager's pools sorted by name.
func (m *Manager) Host(context.Context) (*managerapi.Host, error) {
	return answer(m, Call{Method: Host}, func(n *node) (*managerapi.Host, error) {
		h := n.host
		h.Pools = n.poolInfos()
		return &h, nil
	})
}

// poolInfos returns what the manager says of its pools, sorted by name.
func (n *node) poolInfos() []managerapi.Pool {
	var out []managerapi.Pool
	for _, name := range slices.Sorted(maps.Keys(n.pools)) {
		out = append(out, n.pools[name].info)
	}
	return out
}

// PreparePool answers PUT /v1/pools/{pool}: the pool, made from the
// PoolRoot template when the manager has none of that name and a
// template; else PoolNotFound.
func (m *Manager) PreparePool(_ context.Context, name string) (*managerapi.Pool, error) {
	c := Call{Method: PreparePool, Pool: name}
	return answer(m, c, func(n *node) (*managerapi.Pool, error) {
		p, ok := n.pools[name]
		if !ok && n.poolRoot != nil {
			t := *n.poolRoot
			t.Name, t.Path = name, ""
			p, ok = n.addPool(t), true
		}
		if !ok {
			_, err := n.pool(c)
			return nil, err
		}
		info := p.info
		return &info, nil
	})
}

// ListVolumes answers every volume of the pool, sorted by name, or
// PoolNotFound.
func (m *Manager) ListVolumes(_ context.Context, pool string) (*managerapi.VolumeList, error) {
	return m.list(Call{Method: ListVolumes, Pool: pool}, managerapi.ListOptions{})
}

// ListVolumesPage answers one page of the pool's volumes, as
// ListVolumes's pages are: at most opts.Limit (DefaultListLimit when 0)
// of those whose names sort after opts.Continue, with Continue the last
// one's name when the page is full.
func (m *Manager) ListVolumesPage(_ context.Context, pool string, opts managerapi.ListOptions) (*managerapi.VolumeList, error) {
	if opts.Limit == 0 {
		opts.Limit = managerapi.DefaultListLimit
	}
	return m.list(Call{Method: ListVolumesPage, Pool: pool, Request: opts}, opts)
}

// list answers c with the page opts (opts.Limit 0: every volume).
func (m *Manager) list(c Call, opts managerapi.ListOptions) (*managerapi.VolumeList, error) {
	return answer(m, c, func(n *node) (*managerapi.VolumeList, error) {
		if opts.Limit < 0 {
			return nil, wrap(c, managerapi.Errorf(managerapi.ReasonBadRequest, "limit %d is negative", opts.Limit))
		}
		p, err := n.pool(c)
		if err != nil {
			return nil, err
		}
		l := &managerapi.VolumeList{Items: p.sorted(opts.Continue, opts.Limit)}
		if opts.Limit > 0 && len(l.Items) == opts.Limit && len(p.sorted(l.Items[len(l.Items)-1].Name, 1)) > 0 {
			l.Continue = l.Items[len(l.Items)-1].Name
		}
		return l, nil
	})
}

// GetVolume answers the volume, NotFound or PoolNotFound.
func (m *Manager) GetVolume(_ context.Context, pool, name string) (*managerapi.Volume, error) {
	c := Call{Method: GetVolume, Pool: pool, Name: name}
	return answer(m, c, func(n *node) (*managerapi.Volume, error) {
		_, v, err := n.volume(c)
		if err != nil {
			return nil, err
		}
		return copyVolume(v), nil
	})
}

// CreateVolume makes the volume for req.Owner with an owner record of what
// req says (mode, reclaim policy, claim namespace, size, multihost) and the
// pool's Enforcement, or confirms the one of the same owner (which gets
// req.Mode). A volume of another owner, or without an owner record, is
// OwnerConflict; a pool that does not enforce sizes and req.EnforceSize
// is NotEnforced; a missing pool PoolNotFound.
func (m *Manager) CreateVolume(_ context.Context, pool, name string, req managerapi.CreateVolumeRequest) (*managerapi.Volume, error) {
	c := Call{Method: CreateVolume, Pool: pool, Name: name, Request: req}
	return answer(m, c, func(n *node) (*managerapi.Volume, error) {
		v, err := n.create(c, req)
		if err != nil {
			return nil, err
		}
		return copyVolume(v), nil
	})
}

// create is CreateVolume's, and CloneVolume's once its copy is done.
func (n *node) create(c Call, req managerapi.CreateVolumeRequest) (*managerapi.Volume, error) {
	mode, err := managerapi.ParseMode(req.Mode)
	if err != nil {
		return nil, wrap(c, managerapi.Errorf(managerapi.ReasonBadRequest, "%s", err))
	}
	p, err := n.pool(c)
	if err != nil {
		return nil, err
	}
	if v, ok := p.volumes[c.Name]; ok {
		if v.Owner != req.Owner {
			return nil, ownerConflict(c, v, req.Owner)
		}
		v.Mode = managerapi.FormatMode(mode)
		return v, nil
	}
	if req.EnforceSize && p.info.Enforcement == "" {
		return nil, wrap(c, managerapi.Errorf(managerapi.ReasonNotEnforced, "pool %q cannot enforce volume sizes", c.Pool))
	}
	v := &managerapi.Volume{Name: c.Name, Pool: c.Pool, Path: p.info.Path + "/" + c.Name, Mode: managerapi.FormatMode(mode),
		Owner: req.Owner, ReclaimPolicy: req.ReclaimPolicy, ClaimNamespace: req.ClaimNamespace, Multihost: req.Multihost,
		SizeBytes: req.RequiredBytes, Enforcement: p.info.Enforcement}
	p.volumes[c.Name] = v
	return v, nil
}

// CloneVolume answers the copy of the source volume (which must exist and
// be req.SourceOwner's: else NotFound or OwnerConflict) into a new volume
// made as CreateVolume makes it: CloneCopying while CloneSteps lasts, then
// CloneDone with the volume (CloneMethodCopy), as every later call does.
// A target volume of another owner is OwnerConflict.
func (m *Manager) CloneVolume(_ context.Context, pool, name string, req managerapi.CloneVolumeRequest) (*managerapi.Clone, error) {
	c := Call{Method: CloneVolume, Pool: pool, Name: name, Request: req}
	return answer(m, c, func(n *node) (*managerapi.Clone, error) {
		src := Call{Method: CloneVolume, Pool: req.SourcePool, Name: req.SourceName}
		_, sv, err := n.volume(src)
		if err != nil {
			return nil, rewrap(c, err)
		}
		if sv.Owner != req.SourceOwner {
			return nil, rewrap(c, ownerConflict(src, sv, req.SourceOwner))
		}
		cl := &managerapi.Clone{Source: req.SourcePool + "/" + req.SourceName, State: managerapi.CloneCopying, Method: managerapi.CloneMethodCopy, TotalBytes: 100}
		p, err := n.pool(c)
		if err != nil {
			return nil, err
		}
		if v, ok := p.volumes[name]; ok && v.Owner != req.Owner {
			return nil, ownerConflict(c, v, req.Owner)
		} else if !ok && n.cloneSteps > 0 {
			n.cloneSteps--
			cl.CopiedBytes = int64(100 / (n.cloneSteps + 1))
			return cl, nil
		}
		v, err := n.create(c, req.CreateVolumeRequest)
		if err != nil {
			return nil, err
		}
		v.CloneOf, v.CloneMethod = cl.Source, cl.Method
		cl.State, cl.CopiedBytes, cl.Volume = managerapi.CloneDone, 100, copyVolume(v)
		return cl, nil
	})
}

// rewrap returns err, an answer about the source of clone c, as the
// answer to c.
func rewrap(c Call, err error) error {
	var e *managerapi.Error
	if errors.As(err, &e) {
		return wrap(c, e)
	}
	return err
}

// SetOwner compares and swaps the owner record as the manager does: the
// record must name req.Previous ("" for none; else OwnerConflict naming
// its owner), then names req.Owner with req.Retained; it says multihost
// once it or req did; its reclaim policy and claim namespace are req's
// when set, else kept for the same owner and cleared for a new one. A
// missing volume is NotFound.
func (m *Manager) SetOwner(_ context.Context, pool, name string, req managerapi.SetOwnerRequest) (*managerapi.Volume, error) {
	c := Call{Method: SetOwner, Pool: pool, Name: name, Request: req}
	return answer(m, c, func(n *node) (*managerapi.Volume, error) {
		_, v, err := n.volume(c)
		if err != nil {
			return nil, err
		}
		if v.Owner != req.Previous {
			return nil, ownerConflict(c, v, req.Previous)
		}
		if v.Owner != req.Owner {
			v.ReclaimPolicy, v.ClaimNamespace, v.OwnedSince = "", "", nil
		}
		if req.ReclaimPolicy != "" {
			v.ReclaimPolicy = req.ReclaimPolicy
		}
		if req.ClaimNamespace != "" {
			v.ClaimNamespace = req.ClaimNamespace
		}
		v.Owner, v.Retained, v.Multihost = req.Owner, req.Retained, v.Multihost || req.Multihost
		return copyVolume(v), nil
	})
}

// SetSize grows the volume of req.Owner to req.SizeBytes: another owner,
// or none, is OwnerConflict, a smaller size Conflict (volumes never
// shrink), a missing volume NotFound.
func (m *Manager) SetSize(_ context.Context, pool, name string, req managerapi.SetSizeRequest) (*managerapi.Volume, error) {
	c := Call{Method: SetSize, Pool: pool, Name: name, Request: req}
	return answer(m, c, func(n *node) (*managerapi.Volume, error) {
		_, v, err := n.volume(c)
		if err != nil {
			return nil, err
		}
		switch {
		case v.Owner == "" || v.Owner != req.Owner:
			return nil, ownerConflict(c, v, req.Owner)
		case req.SizeBytes < v.SizeBytes:
			return nil, wrap(c, managerapi.Errorf(managerapi.ReasonConflict, "volume %q in pool %q has size %d; it cannot shrink to %d", name, pool, v.SizeBytes, req.SizeBytes))
		}
		v.SizeBytes = req.SizeBytes
		return copyVolume(v), nil
	})
}

// DeleteVolume removes the volume of opts.Owner; a missing volume is a
// success, another owner (or none) OwnerConflict, a missing pool
// PoolNotFound, and opts.IfEmpty with a volume that uses bytes
// (UsedBytes above 0) NotEmpty.
func (m *Manager) DeleteVolume(_ context.Context, pool, name string, opts managerapi.DeleteOptions) error {
	c := Call{Method: DeleteVolume, Pool: pool, Name: name, Request: opts}
	_, err := answer(m, c, func(n *node) (struct{}, error) {
		p, err := n.pool(c)
		if err != nil {
			return struct{}{}, err
		}
		v, ok := p.volumes[name]
		switch {
		case !ok:
			return struct{}{}, nil
		case v.Owner == "" || v.Owner != opts.Owner:
			return struct{}{}, ownerConflict(c, v, opts.Owner)
		case opts.IfEmpty && v.UsedBytes != nil && *v.UsedBytes > 0:
			return struct{}{}, wrap(c, managerapi.Errorf(managerapi.ReasonNotEmpty, "volume %q in pool %q is not empty", name, pool))
		}
		delete(p.volumes, name)
		return struct{}{}, nil
	})
	return err
}
