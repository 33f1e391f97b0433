package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/manager/internal/auth"
)

// fakeAuthorizer knows these tokens: "admin" may do anything, "reader" may
// only get and list, "remote" may do anything as a caller bound to node-b,
// "broken" makes the decision fail, "busy" is over a limit. It records
// what it was asked.
type fakeAuthorizer struct {
	mu    sync.Mutex
	asked []auth.Attributes
}

func (f *fakeAuthorizer) Authorize(_ context.Context, c review.Caller, a auth.Attributes) (*auth.Decision, error) {
	f.mu.Lock()
	f.asked = append(f.asked, a)
	f.mu.Unlock()
	switch c.Token {
	case "":
		return nil, &review.Error{Reason: managerapi.ReasonUnauthorized, Message: "no bearer token"}
	case "admin":
		return &auth.Decision{User: &review.User{Name: "admin"}}, nil
	case "remote":
		return &auth.Decision{User: &review.User{Name: "remote"}, Remote: "node-b"}, nil
	case "reader":
		if a.Verb == "get" || a.Verb == "list" {
			return &auth.Decision{User: &review.User{Name: "reader"}}, nil
		}
		return nil, &review.Error{Reason: managerapi.ReasonForbidden, Message: "reader cannot " + a.String()}
	case "broken":
		return nil, errors.New("token review: connection refused")
	case "busy":
		return nil, &review.Error{Reason: managerapi.ReasonTooManyRequests, Message: "slow down", RetryAfter: 1500 * time.Millisecond}
	}
	return nil, &review.Error{Reason: managerapi.ReasonUnauthorized, Message: "token rejected"}
}

func (f *fakeAuthorizer) calls() []auth.Attributes {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]auth.Attributes(nil), f.asked...)
}

// fakeBackend records its calls as strings and answers with canned
// objects, or with err when set. When entered is set, CreateVolume sends
// on it and then waits for release to be closed.
type fakeBackend struct {
	err     error
	entered chan<- struct{}
	release <-chan struct{}

	mu    sync.Mutex
	calls []string
}

var _ Backend = &fakeBackend{}

func (f *fakeBackend) record(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	return f.err
}

func (f *fakeBackend) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func volume(pool, name, owner string, mode fs.FileMode) *managerapi.Volume {
	return &managerapi.Volume{Name: name, Pool: pool, Path: "/pools/" + pool + "/" + name, Mode: managerapi.FormatMode(mode), Owner: owner}
}

func (f *fakeBackend) Host(context.Context) (*managerapi.Host, error) {
	if err := f.record("Host"); err != nil {
		return nil, err
	}
	return &managerapi.Host{NodeName: "node-a", HostID: "h", BootID: "b", Pools: []managerapi.Pool{{Name: "default", Path: "/pools/default"}}}, nil
}

func (f *fakeBackend) PreparePool(_ context.Context, pool string) (*managerapi.Pool, error) {
	if err := f.record("PreparePool %s", pool); err != nil {
		return nil, err
	}
	return &managerapi.Pool{Name: pool, Path: "/pools/" + pool}, nil
}

func (f *fakeBackend) ListVolumes(_ context.Context, pool string, _ ...managerapi.ListOptions) (*managerapi.VolumeList, error) {
	if err := f.record("ListVolumes %s", pool); err != nil {
		return nil, err
	}
	return &managerapi.VolumeList{Items: []managerapi.Volume{*volume(pool, "a", "pv-a", 0o777)}}, nil
}

func (f *fakeBackend) GetVolume(_ context.Context, pool, name string) (*managerapi.Volume, error) {
	if err := f.record("GetVolume %s %s", pool, name); err != nil {
		return nil, err
	}
	v := volume(pool, name, "pv-1", 0o777)
	v.ReclaimPolicy = managerapi.ReclaimDelete
	return v, nil
}

func (f *fakeBackend) CreateVolume(_ context.Context, pool, name string, req managerapi.CreateVolumeRequest, mode fs.FileMode, remote string) (*managerapi.Volume, bool, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.release
	}
	if err := f.record("CreateVolume %s %s owner=%s mode=%s required=%d policy=%s enforce=%t ns=%s%s", pool, name, req.Owner, managerapi.FormatMode(mode), req.RequiredBytes, req.ReclaimPolicy, req.EnforceSize, req.ClaimNamespace, writeSuffix(req.Multihost, remote)); err != nil {
		return nil, false, err
	}
	v := volume(pool, name, req.Owner, mode)
	v.ReclaimPolicy, v.ClaimNamespace = req.ReclaimPolicy, req.ClaimNamespace
	return v, name != "existing", nil
}

func (f *fakeBackend) CloneVolume(_ context.Context, pool, name string, req managerapi.CloneVolumeRequest, mode fs.FileMode, remote string) (*managerapi.Clone, bool, error) {
	if err := f.record("CloneVolume %s %s owner=%s mode=%s required=%d source=%s/%s sourceOwner=%s%s", pool, name, req.Owner, managerapi.FormatMode(mode), req.RequiredBytes, req.SourcePool, req.SourceName, req.SourceOwner, writeSuffix(req.Multihost, remote)); err != nil {
		return nil, false, err
	}
	cl := &managerapi.Clone{Source: req.SourcePool + "/" + req.SourceName, State: managerapi.CloneCopying, Method: managerapi.CloneMethodCopy}
	switch name {
	case "done":
		cl.State, cl.Volume = managerapi.CloneDone, volume(pool, name, req.Owner, mode)
		return cl, true, nil
	case "existing":
		cl.State, cl.Volume = managerapi.CloneDone, volume(pool, name, req.Owner, mode)
	}
	return cl, false, nil
}

func (f *fakeBackend) SetSize(_ context.Context, pool, name, owner string, sizeBytes int64, remote string) (*managerapi.Volume, error) {
	if err := f.record("SetSize %s %s owner=%s size=%d%s", pool, name, owner, sizeBytes, writeSuffix(false, remote)); err != nil {
		return nil, err
	}
	v := volume(pool, name, owner, 0o777)
	v.SizeBytes = sizeBytes
	return v, nil
}

func (f *fakeBackend) SetOwner(_ context.Context, pool, name string, req managerapi.SetOwnerRequest, remote string) (*managerapi.Volume, error) {
	if err := f.record("SetOwner %s %s owner=%s previous=%s retained=%t policy=%s ns=%s%s", pool, name, req.Owner, req.Previous, req.Retained, req.ReclaimPolicy, req.ClaimNamespace, writeSuffix(req.Multihost, remote)); err != nil {
		return nil, err
	}
	v := volume(pool, name, req.Owner, 0o777)
	v.Retained, v.ReclaimPolicy, v.ClaimNamespace = req.Retained, req.ReclaimPolicy, req.ClaimNamespace
	return v, nil
}

func (f *fakeBackend) DeleteVolume(_ context.Context, pool, name, owner string, ifEmpty bool, remote string) (bool, error) {
	if err := f.record("DeleteVolume %s %s owner=%s ifEmpty=%t%s", pool, name, owner, ifEmpty, writeSuffix(false, remote)); err != nil {
		return false, err
	}
	return true, nil
}

// writeSuffix is how a recorded write says that the request is multihost
// and that the caller is bound to another node: " multihost" and
// " remote=NODE", each only when so.
func writeSuffix(multihost bool, remote string) string {
	s := ""
	if multihost {
		s += " multihost"
	}
	if remote != "" {
		s += " remote=" + remote
	}
	return s
}
