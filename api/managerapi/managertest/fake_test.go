package managertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"hostpath.dev/api/managerapi"
)

// TestSameMethodsAsTheClient checks that a Manager has every call method
// of *managerapi.Client, with the same signature, so that it satisfies
// any interface a consumer declares over the client.
func TestSameMethodsAsTheClient(t *testing.T) {
	client, fake := reflect.TypeFor[*managerapi.Client](), reflect.TypeFor[*Manager]()
	ctx := reflect.TypeFor[context.Context]()
	calls := 0
	for i := range client.NumMethod() {
		m := client.Method(i)
		if m.Type.NumIn() < 2 || m.Type.In(1) != ctx {
			continue // BaseURL
		}
		calls++
		f, ok := fake.MethodByName(m.Name)
		if !ok {
			t.Errorf("Manager has no method %s", m.Name)
			continue
		}
		// Both types start with their receiver.
		want, got := m.Type.String(), f.Type.String()
		if want[strings.Index(want, ","):] != got[strings.Index(got, ","):] {
			t.Errorf("%s: Manager's is %s, the client's %s", m.Name, got, want)
		}
	}
	if calls != 10 {
		t.Errorf("the client has %d call methods, want the 10 a Manager has: update the fake", calls)
	}
}

// managerOf returns a Fake whose node-a has pool "default" (xfs) with
// volume "mine" of pv-mine, sized 1 GiB, and "legacy", without an owner
// record; "used" of pv-used uses bytes.
func managerOf(t *testing.T) (*Fake, *Manager) {
	t.Helper()
	f := New()
	m := f.Node("node-a")
	m.AddPool(managerapi.Pool{Name: "default", Enforcement: managerapi.EnforcementXFS})
	m.AddVolume(managerapi.Volume{Name: "mine", Pool: "default", Owner: "pv-mine", SizeBytes: 1 << 30, ClaimNamespace: "ns", ReclaimPolicy: "Delete"})
	m.AddVolume(managerapi.Volume{Name: "legacy", Pool: "default", Enforcement: "none-asked"})
	used := int64(10)
	m.AddVolume(managerapi.Volume{Name: "used", Pool: "default", Owner: "pv-used", UsedBytes: &used})
	return f, m
}

// TestAnswers checks that each call answers as the manager does, by
// managerapi.Classify and, for OwnerConflict, managerapi.OwnerOf, with the
// client's wrapping.
func TestAnswers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		call      func(m *Manager) error
		want      managerapi.Answer
		wantOwner string
		wantErr   string
	}{{
		name: "a volume", want: managerapi.AnswerOK,
		call: func(m *Manager) error { _, err := m.GetVolume(ctx, "default", "mine"); return err },
	}, {
		name: "no volume", want: managerapi.AnswerVolumeMissing, wantErr: "GET /v1/pools/default/volumes/gone: manager answered 404 NotFound",
		call: func(m *Manager) error { _, err := m.GetVolume(ctx, "default", "gone"); return err },
	}, {
		name: "no pool", want: managerapi.AnswerPoolMissing, wantErr: "GET /v1/pools/fast/volumes: manager answered 404 PoolNotFound",
		call: func(m *Manager) error { _, err := m.ListVolumes(ctx, "fast"); return err },
	}, {
		name: "prepare a pool it does not have", want: managerapi.AnswerPoolMissing, wantErr: "PUT /v1/pools/fast: ",
		call: func(m *Manager) error { _, err := m.PreparePool(ctx, "fast"); return err },
	}, {
		name: "prepare a pool it has", want: managerapi.AnswerOK,
		call: func(m *Manager) error { _, err := m.PreparePool(ctx, "default"); return err },
	}, {
		name: "create again for the same owner", want: managerapi.AnswerOK,
		call: func(m *Manager) error {
			_, err := m.CreateVolume(ctx, "default", "mine", managerapi.CreateVolumeRequest{Owner: "pv-mine"})
			return err
		},
	}, {
		name: "create over another owner's", want: managerapi.AnswerOwnerConflict, wantOwner: "pv-mine", wantErr: "PUT /v1/pools/default/volumes/mine: manager answered 409 OwnerConflict",
		call: func(m *Manager) error {
			_, err := m.CreateVolume(ctx, "default", "mine", managerapi.CreateVolumeRequest{Owner: "pv-other"})
			return err
		},
	}, {
		name: "create over a directory without a record", want: managerapi.AnswerOwnerConflict, wantOwner: "",
		call: func(m *Manager) error {
			_, err := m.CreateVolume(ctx, "default", "legacy", managerapi.CreateVolumeRequest{Owner: "pv-other"})
			return err
		},
	}, {
		name: "create with an invalid mode", want: managerapi.AnswerInvalid,
		call: func(m *Manager) error {
			_, err := m.CreateVolume(ctx, "default", "new", managerapi.CreateVolumeRequest{Owner: "pv-new", Mode: "999"})
			return err
		},
	}, {
		name: "create in a pool it does not have", want: managerapi.AnswerPoolMissing,
		call: func(m *Manager) error {
			_, err := m.CreateVolume(ctx, "fast", "new", managerapi.CreateVolumeRequest{Owner: "pv-new"})
			return err
		},
	}, {
		name: "set the owner of another's", want: managerapi.AnswerOwnerConflict, wantOwner: "pv-mine", wantErr: "PUT /v1/pools/default/volumes/mine/owner: ",
		call: func(m *Manager) error {
			_, err := m.SetOwner(ctx, "default", "mine", managerapi.SetOwnerRequest{Owner: "pv-new", Previous: ""})
			return err
		},
	}, {
		name: "set the owner of none", want: managerapi.AnswerVolumeMissing,
		call: func(m *Manager) error {
			_, err := m.SetOwner(ctx, "default", "gone", managerapi.SetOwnerRequest{Owner: "pv-new"})
			return err
		},
	}, {
		name: "grow", want: managerapi.AnswerOK,
		call: func(m *Manager) error {
			_, err := m.SetSize(ctx, "default", "mine", managerapi.SetSizeRequest{Owner: "pv-mine", SizeBytes: 2 << 30})
			return err
		},
	}, {
		name: "shrink", want: managerapi.AnswerConflict, wantErr: "PUT /v1/pools/default/volumes/mine/size: manager answered 409 Conflict",
		call: func(m *Manager) error {
			_, err := m.SetSize(ctx, "default", "mine", managerapi.SetSizeRequest{Owner: "pv-mine", SizeBytes: 1})
			return err
		},
	}, {
		name: "grow another's", want: managerapi.AnswerOwnerConflict, wantOwner: "pv-mine",
		call: func(m *Manager) error {
			_, err := m.SetSize(ctx, "default", "mine", managerapi.SetSizeRequest{Owner: "pv-other", SizeBytes: 2 << 30})
			return err
		},
	}, {
		name: "grow a directory without a record", want: managerapi.AnswerOwnerConflict, wantOwner: "",
		call: func(m *Manager) error {
			_, err := m.SetSize(ctx, "default", "legacy", managerapi.SetSizeRequest{Owner: "", SizeBytes: 2 << 30})
			return err
		},
	}, {
		name: "delete none", want: managerapi.AnswerOK,
		call: func(m *Manager) error {
			return m.DeleteVolume(ctx, "default", "gone", managerapi.DeleteOptions{Owner: "pv-gone"})
		},
	}, {
		name: "delete in a pool it does not have", want: managerapi.AnswerPoolMissing, wantErr: "DELETE /v1/pools/fast/volumes/x: ",
		call: func(m *Manager) error {
			return m.DeleteVolume(ctx, "fast", "x", managerapi.DeleteOptions{Owner: "pv-x"})
		},
	}, {
		name: "delete another's", want: managerapi.AnswerOwnerConflict, wantOwner: "pv-mine",
		call: func(m *Manager) error {
			return m.DeleteVolume(ctx, "default", "mine", managerapi.DeleteOptions{Owner: "pv-other"})
		},
	}, {
		name: "delete a directory without a record", want: managerapi.AnswerOwnerConflict, wantOwner: "",
		call: func(m *Manager) error {
			return m.DeleteVolume(ctx, "default", "legacy", managerapi.DeleteOptions{Owner: ""})
		},
	}, {
		name: "delete if empty, not empty", want: managerapi.AnswerNotEmpty,
		call: func(m *Manager) error {
			return m.DeleteVolume(ctx, "default", "used", managerapi.DeleteOptions{Owner: "pv-used", IfEmpty: true})
		},
	}, {
		name: "delete if empty, empty", want: managerapi.AnswerOK,
		call: func(m *Manager) error {
			return m.DeleteVolume(ctx, "default", "mine", managerapi.DeleteOptions{Owner: "pv-mine", IfEmpty: true})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := managerOf(t)
			err := tc.call(m)
			if got := managerapi.Classify(err); got != tc.want {
				t.Errorf("answer = %s (%v), want %s", got, err, tc.want)
			}
			if owner, ok := managerapi.OwnerOf(err); ok && owner != tc.wantOwner {
				t.Errorf("owner = %q, want %q", owner, tc.wantOwner)
			}
			if tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)) {
				t.Errorf("error = %v, want it to start with %q", err, tc.wantErr)
			}
		})
	}
}

// TestRecords checks what the writes leave in the owner records.
func TestRecords(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		write func(m *Manager) error
		// volume is the one looked at, in pool default.
		volume string
		want   managerapi.Volume
		gone   bool
	}{{
		name: "create",
		write: func(m *Manager) error {
			_, err := m.CreateVolume(ctx, "default", "new", managerapi.CreateVolumeRequest{Owner: "pv-new", Mode: "2775", ReclaimPolicy: "Retain",
				ClaimNamespace: "team", RequiredBytes: 5, Multihost: true})
			return err
		},
		volume: "new",
		want: managerapi.Volume{Name: "new", Pool: "default", Path: "/var/hostpath/default/new", Mode: "02775", Owner: "pv-new", ReclaimPolicy: "Retain",
			ClaimNamespace: "team", Multihost: true, SizeBytes: 5, Enforcement: managerapi.EnforcementXFS},
	}, {
		name: "create again: the same record, the mode asked",
		write: func(m *Manager) error {
			_, err := m.CreateVolume(ctx, "default", "mine", managerapi.CreateVolumeRequest{Owner: "pv-mine", Mode: "0700"})
			return err
		},
		volume: "mine",
		want:   managerapi.Volume{Name: "mine", Pool: "default", Path: "/var/hostpath/default/mine", Mode: "0700", Enforcement: managerapi.EnforcementXFS, Owner: "pv-mine", SizeBytes: 1 << 30, ClaimNamespace: "ns", ReclaimPolicy: "Delete"},
	}, {
		name: "adopt: the namespace asked",
		write: func(m *Manager) error {
			_, err := m.SetOwner(ctx, "default", "legacy", managerapi.SetOwnerRequest{Owner: "pv-new", ClaimNamespace: "team"})
			return err
		},
		volume: "legacy",
		want:   managerapi.Volume{Name: "legacy", Pool: "default", Path: "/var/hostpath/default/legacy", Mode: "0777", Owner: "pv-new", ClaimNamespace: "team", Enforcement: "none-asked"},
	}, {
		name: "hand over: the previous owner's policy and namespace cleared",
		write: func(m *Manager) error {
			_, err := m.SetOwner(ctx, "default", "mine", managerapi.SetOwnerRequest{Owner: "pv-new", Previous: "pv-mine"})
			return err
		},
		volume: "mine",
		want:   managerapi.Volume{Name: "mine", Pool: "default", Path: "/var/hostpath/default/mine", Mode: "0777", Enforcement: managerapi.EnforcementXFS, Owner: "pv-new", SizeBytes: 1 << 30},
	}, {
		name: "same owner: kept, retained and multihost as asked",
		write: func(m *Manager) error {
			_, err := m.SetOwner(ctx, "default", "mine", managerapi.SetOwnerRequest{Owner: "pv-mine", Previous: "pv-mine", Retained: true, Multihost: true})
			return err
		},
		volume: "mine",
		want: managerapi.Volume{Name: "mine", Pool: "default", Path: "/var/hostpath/default/mine", Mode: "0777", Enforcement: managerapi.EnforcementXFS, Owner: "pv-mine", SizeBytes: 1 << 30,
			ClaimNamespace: "ns", ReclaimPolicy: "Delete", Retained: true, Multihost: true},
	}, {
		name: "grow",
		write: func(m *Manager) error {
			_, err := m.SetSize(ctx, "default", "mine", managerapi.SetSizeRequest{Owner: "pv-mine", SizeBytes: 2 << 30})
			return err
		},
		volume: "mine",
		want:   managerapi.Volume{Name: "mine", Pool: "default", Path: "/var/hostpath/default/mine", Mode: "0777", Enforcement: managerapi.EnforcementXFS, Owner: "pv-mine", SizeBytes: 2 << 30, ClaimNamespace: "ns", ReclaimPolicy: "Delete"},
	}, {
		name: "delete",
		write: func(m *Manager) error {
			return m.DeleteVolume(ctx, "default", "mine", managerapi.DeleteOptions{Owner: "pv-mine"})
		},
		volume: "mine",
		gone:   true,
	}, {
		name: "a failed write changes nothing",
		write: func(m *Manager) error {
			_, err := m.SetSize(ctx, "default", "mine", managerapi.SetSizeRequest{Owner: "pv-other", SizeBytes: 2 << 30})
			if err == nil {
				return errors.New("no error")
			}
			return nil
		},
		volume: "mine",
		want:   managerapi.Volume{Name: "mine", Pool: "default", Path: "/var/hostpath/default/mine", Mode: "0777", Enforcement: managerapi.EnforcementXFS, Owner: "pv-mine", SizeBytes: 1 << 30, ClaimNamespace: "ns", ReclaimPolicy: "Delete"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := managerOf(t)
			if err := tc.write(m); err != nil {
				t.Fatal(err)
			}
			v, ok := m.Volume("default", tc.volume)
			if ok == tc.gone {
				t.Fatalf("volume %s exists: %t, want %t", tc.volume, ok, !tc.gone)
			}
			if !tc.gone && !reflect.DeepEqual(v, tc.want) {
				t.Errorf("volume =\n%+v\nwant\n%+v", v, tc.want)
			}
		})
	}
}

// TestHostAndPools checks Host, the pools, PoolRoot and paging.
func TestHostAndPools(t *testing.T) {
	ctx := context.Background()
	f := New()
	m := f.Node("node-a")
	m.UpdateHost(func(h *managerapi.Host) { h.BootID = "boot-1" })
	m.AddPool(managerapi.Pool{Name: "slow", Path: "/srv/slow"})
	m.AddVolume(managerapi.Volume{Name: "b", Pool: "fast"})
	m.AddVolume(managerapi.Volume{Name: "a", Pool: "fast"})
	m.AddVolume(managerapi.Volume{Name: "c", Pool: "fast"})
	h, err := m.Host(ctx)
	if err != nil || h.NodeName != "node-a" || h.BootID != "boot-1" || len(h.Pools) != 2 || h.Pools[0].Name != "fast" || h.Pools[1].Path != "/srv/slow" {
		t.Errorf("Host = %+v, %v", h, err)
	}
	if l, err := m.ListVolumes(ctx, "fast"); err != nil || len(l.Items) != 3 || l.Items[0].Name != "a" || l.Items[0].Path != "/var/hostpath/fast/a" || l.Continue != "" {
		t.Errorf("ListVolumes = %+v, %v", l, err)
	}
	var pages []string
	opts := managerapi.ListOptions{Limit: 2}
	for {
		l, err := m.ListVolumesPage(ctx, "fast", opts)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range l.Items {
			names = append(names, v.Name)
		}
		pages = append(pages, strings.Join(names, ","))
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if want := []string{"a,b", "c"}; !slices.Equal(pages, want) {
		t.Errorf("pages = %q, want %q", pages, want)
	}
	m.PoolRoot(managerapi.Pool{FreeBytes: 7})
	if p, err := m.PreparePool(ctx, "new"); err != nil || p.Name != "new" || p.Path != "/var/hostpath/new" || p.FreeBytes != 7 {
		t.Errorf("PreparePool with a pool root = %+v, %v", p, err)
	}
	if !m.UpdatePool("new", func(p *managerapi.Pool) { p.FreeBytes = 8 }) || m.UpdatePool("none", func(*managerapi.Pool) {}) {
		t.Error("UpdatePool found a pool it should not, or not one it should")
	}
	if got := m.Pools(); len(got) != 3 || got[0].Name != "fast" || got[1].Name != "new" || got[1].FreeBytes != 8 || got[2].Name != "slow" {
		t.Errorf("Pools = %+v", got)
	}
	m.RemovePool("fast")
	if _, err := m.ListVolumes(ctx, "fast"); managerapi.Classify(err) != managerapi.AnswerPoolMissing {
		t.Errorf("ListVolumes of a removed pool = %v", err)
	}
}

// TestClone checks that a clone follows its source's rules and the
// copy's steps.
func TestClone(t *testing.T) {
	ctx := context.Background()
	_, m := managerOf(t)
	req := managerapi.CloneVolumeRequest{CreateVolumeRequest: managerapi.CreateVolumeRequest{Owner: "pv-new"}, SourcePool: "default", SourceName: "mine", SourceOwner: "pv-mine"}
	wrong := req
	wrong.SourceOwner = "pv-other"
	if _, err := m.CloneVolume(ctx, "default", "new", wrong); managerapi.Classify(err) != managerapi.AnswerOwnerConflict ||
		!strings.HasPrefix(err.Error(), "PUT /v1/pools/default/volumes/new/clone: ") {
		t.Errorf("a clone of another's source = %v, want OwnerConflict", err)
	}
	m.CloneSteps(2)
	var states []string
	for range 4 {
		cl, err := m.CloneVolume(ctx, "default", "new", req)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, fmt.Sprintf("%s %d", cl.State, cl.CopiedBytes))
	}
	if want := []string{"Copying 50", "Copying 100", "Done 100", "Done 100"}; !slices.Equal(states, want) {
		t.Errorf("clone states = %q, want %q", states, want)
	}
	if v, ok := m.Volume("default", "new"); !ok || v.Owner != "pv-new" || v.CloneOf != "default/mine" {
		t.Errorf("clone = %+v, %t", v, ok)
	}
}

// TestFailures checks the scripted errors: per node, call and volume, a
// number of times, wrapped as the client does when they are bare answers.
func TestFailures(t *testing.T) {
	ctx := context.Background()
	f, a := managerOf(t)
	b := f.Node("node-b")
	b.AddPool(managerapi.Pool{Name: "default"})
	refused := errors.New("connection refused")
	f.Fail(Failure{Node: "node-a", Method: GetVolume, Name: "mine", Err: managerapi.Errorf(managerapi.ReasonInternal, "disk on fire"), Times: 1})
	f.Fail(Failure{Node: "node-b", Err: refused})
	_, err := a.GetVolume(ctx, "default", "mine")
	if want := "GET /v1/pools/default/volumes/mine: manager answered 500 Internal: disk on fire"; err == nil || err.Error() != want {
		t.Errorf("scripted GetVolume = %v, want %q", err, want)
	}
	if _, err := a.GetVolume(ctx, "default", "mine"); err != nil {
		t.Errorf("GetVolume after the one failure = %v", err)
	}
	if _, err := b.Host(ctx); !errors.Is(err, refused) || err.Error() != refused.Error() {
		t.Errorf("node-b Host = %v, want %v as it is", err, refused)
	}
	if _, err := a.Host(ctx); err != nil {
		t.Errorf("node-a Host = %v", err)
	}
	f.ClearFailures()
	if _, err := b.Host(ctx); err != nil {
		t.Errorf("node-b Host after ClearFailures = %v", err)
	}
	if got, want := Strings(f.Take()), []string{"node-a GetVolume default/mine", "node-a GetVolume default/mine", "node-b Host", "node-a Host", "node-b Host"}; !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q (failed ones too)", got, want)
	}
	if len(f.Calls()) != 0 {
		t.Errorf("calls after Take = %v", f.Calls())
	}
}

// manager is a consumer's interface, as the programs declare them.
type manager interface {
	Host(ctx context.Context) (*managerapi.Host, error)
}

// TestForNode checks which managers ForNode and For answer.
func TestForNode(t *testing.T) {
	f := New()
	f.Node("node-a")
	forNode := For[manager](f)
	if m, err := forNode("node-a"); err != nil || m.(*Manager).NodeName() != "node-a" {
		t.Errorf("For(node-a) = %v, %v", m, err)
	}
	var none *NoManagerError
	if _, err := forNode("node-b"); !errors.As(err, &none) || none.Node != "node-b" || !strings.Contains(err.Error(), "no Ready manager pod") {
		t.Errorf("For(node-b) = %v, want a NoManagerError", err)
	}
	f.FailForNode("node-a", nil)
	if _, err := f.ForNode("node-a"); !errors.As(err, &none) {
		t.Errorf("ForNode after FailForNode = %v", err)
	}
	boom := errors.New("boom")
	f.FailForNode("node-a", boom)
	if _, err := f.ForNode("node-a"); err != boom {
		t.Errorf("ForNode after FailForNode(boom) = %v", err)
	}
	f.Restore("node-a")
	f.Restore("node-c")
	for _, n := range []string{"node-a", "node-c"} {
		if _, err := f.ForNode(n); err != nil {
			t.Errorf("ForNode(%s) after Restore = %v", n, err)
		}
	}
}

// TestOnCall checks that the hooks see each call before it is answered,
// and may call the Fake.
func TestOnCall(t *testing.T) {
	ctx := context.Background()
	f, m := managerOf(t)
	var seen []string
	f.OnCall(func(c Call) {
		seen = append(seen, c.String())
		if c.Method == DeleteVolume {
			m.RemoveVolume("default", "mine") // gone before the delete is answered
		}
	})
	if err := m.DeleteVolume(ctx, "default", "mine", managerapi.DeleteOptions{Owner: "pv-other"}); err != nil {
		t.Errorf("DeleteVolume = %v, want the volume gone by then", err)
	}
	if want := []string{"node-a DeleteVolume default/mine"}; !slices.Equal(seen, want) {
		t.Errorf("seen = %q, want %q", seen, want)
	}
	if c := m.Calls(); len(c) != 1 || c[0].Request.(managerapi.DeleteOptions).Owner != "pv-other" {
		t.Errorf("Calls = %+v", c)
	}
}

// TestConcurrent calls a Fake from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	f := New()
	nodes := []string{"node-a", "node-b", "node-c"}
	for _, n := range nodes {
		f.Node(n).AddPool(managerapi.Pool{Name: "default"})
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			m, err := f.ForNode(nodes[i%3])
			if err != nil {
				t.Error(err)
				return
			}
			name := fmt.Sprintf("v-%d", i)
			if _, err := m.CreateVolume(ctx, "default", name, managerapi.CreateVolumeRequest{Owner: "pv-" + name}); err != nil {
				t.Error(err)
			}
			m.UpdateVolume("default", name, func(v *managerapi.Volume) { v.Retained = true })
		})
	}
	wg.Wait()
	total := 0
	for _, n := range nodes {
		total += len(f.Node(n).Volumes("default"))
	}
	if total != 30 || len(f.Calls()) != 30 {
		t.Errorf("%d volumes and %d calls, want 30 of each", total, len(f.Calls()))
	}
}

// TestAnswer checks the answers made for code handed them directly.
func TestAnswer(t *testing.T) {
	err := Answer(managerapi.ReasonInsufficientStorage, "pool %q is full", "default")
	if want := `PUT /v1/pools/default/volumes/x: manager answered 507 InsufficientStorage: pool "default" is full`; err.Error() != want ||
		managerapi.Classify(err) != managerapi.AnswerNoSpace {
		t.Errorf("Answer = %v (%s), want %q", err, managerapi.Classify(err), want)
	}
	for _, owner := range []string{"pv-a", ""} {
		if got, ok := managerapi.OwnerOf(OwnerConflict(owner)); !ok || got != owner {
			t.Errorf("OwnerOf(OwnerConflict(%q)) = %q, %t", owner, got, ok)
		}
	}
}
