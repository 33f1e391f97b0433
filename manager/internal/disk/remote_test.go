package disk

import (
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/manager/pkg/client"
)

// TestRemoteCaller: a caller bound to another node (remote "node-b"; the
// Store is node-a's) changes only multihost volumes: every write on a
// node-mode record, a node-mode create and the adoption of a directory
// without a record in node mode are Forbidden, name both nodes and change
// nothing on disk; on a multihost record each write works. This node's
// callers (remote "") keep every write, and may mark a record multihost.
func TestRemoteCaller(t *testing.T) {
	const remote = "node-b"
	nodeMode := func(t *testing.T, e *testEnv) {
		e.volume(t, "v1")
		e.writeRecord(t, "v1", "pv-a", false)
	}
	multihost := func(t *testing.T, e *testEnv) {
		e.volume(t, "v1")
		e.writeMultihostRecord(t, "v1", "pv-a")
	}
	unrecorded := func(t *testing.T, e *testEnv) { e.volume(t, "v1") }
	for _, tc := range []struct {
		desc   string
		setup  func(t *testing.T, e *testEnv)
		op     string // create, create-multihost, set, set-multihost, size, delete
		remote string
		// wantReason is the error's ("" for none); wantMultihost the
		// record's mode afterwards.
		wantReason    client.Reason
		wantMultihost bool
	}{
		{desc: "remote create in node mode", op: "create", remote: remote, wantReason: client.ReasonForbidden},
		{desc: "remote create of a multihost volume", op: "create-multihost", remote: remote, wantMultihost: true},
		{desc: "remote multihost create over a node-mode record", setup: nodeMode, op: "create-multihost", remote: remote, wantReason: client.ReasonForbidden},
		{desc: "remote create over a multihost record", setup: multihost, op: "create-multihost", remote: remote, wantMultihost: true},
		{desc: "remote delete of a node-mode volume", setup: nodeMode, op: "delete", remote: remote, wantReason: client.ReasonForbidden},
		{desc: "remote resize of a node-mode volume", setup: nodeMode, op: "size", remote: remote, wantReason: client.ReasonForbidden},
		{desc: "remote re-own of a node-mode volume", setup: nodeMode, op: "set", remote: remote, wantReason: client.ReasonForbidden},
		{desc: "remote marking of a node-mode volume", setup: nodeMode, op: "set-multihost", remote: remote, wantReason: client.ReasonForbidden},
		{desc: "remote adoption in node mode", setup: unrecorded, op: "set", remote: remote, wantReason: client.ReasonForbidden},
		{desc: "remote adoption of a multihost directory", setup: unrecorded, op: "set-multihost", remote: remote, wantMultihost: true},
		{desc: "remote delete of a multihost volume", setup: multihost, op: "delete", remote: remote},
		{desc: "remote resize of a multihost volume", setup: multihost, op: "size", remote: remote, wantMultihost: true},
		{desc: "remote re-own of a multihost volume keeps its mode", setup: multihost, op: "set", remote: remote, wantMultihost: true},
		{desc: "remote delete where nothing is", op: "delete", remote: remote},
		{desc: "local delete of a node-mode volume", setup: nodeMode, op: "delete"},
		{desc: "local resize of a node-mode volume", setup: nodeMode, op: "size"},
		{desc: "local create in node mode", op: "create"},
		{desc: "local marking of a node-mode volume", setup: nodeMode, op: "set-multihost", wantMultihost: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			before := snapshot(t, e.base)
			var err error
			switch tc.op {
			case "create", "create-multihost":
				req := client.CreateVolumeRequest{Owner: "pv-a", Multihost: tc.op == "create-multihost"}
				_, _, err = e.store.CreateVolume(ctx, "default", "v1", req, 0o755, tc.remote)
			case "set", "set-multihost":
				previous := "pv-a"
				if e.record(t, "v1") == nil {
					previous = ""
				}
				req := client.SetOwnerRequest{Owner: "pv-a", Previous: previous, Multihost: tc.op == "set-multihost"}
				_, err = e.store.SetOwner(ctx, "default", "v1", req, tc.remote)
			case "size":
				_, err = e.store.SetSize(ctx, "default", "v1", "pv-a", 1<<20, tc.remote)
			case "delete":
				_, err = e.store.DeleteVolume(ctx, "default", "v1", "pv-a", false, tc.remote)
			}
			checkErr(t, tc.op, err, tc.wantReason, "")
			if tc.wantReason != "" {
				for _, want := range []string{`"node-a"`, `"node-b"`, `"v1"`} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("message %q does not name %s", err, want)
					}
				}
				if d := diff(before, snapshot(t, e.base)); len(d) > 0 {
					t.Errorf("a refused call changed the disk: %v", d)
				}
				return
			}
			if rec := e.record(t, "v1"); rec != nil && rec.Multihost != tc.wantMultihost {
				t.Errorf("record says multihost %v, want %v", rec.Multihost, tc.wantMultihost)
			}
		})
	}
}

// TestMultihostListed: GET of a volume and the pool's listing say which
// volumes are multihost, from their records.
func TestMultihostListed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	if _, _, err := e.store.CreateVolume(ctx, "default", "m", client.CreateVolumeRequest{Owner: "pv-m", Multihost: true}, 0o755, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.CreateVolume(ctx, "default", "n", client.CreateVolumeRequest{Owner: "pv-n"}, 0o755, ""); err != nil {
		t.Fatal(err)
	}
	list, err := e.store.ListVolumes(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, v := range list.Items {
		got[v.Name] = v.Multihost
	}
	if len(got) != 2 || !got["m"] || got["n"] {
		t.Errorf("listed multihost = %v, want m only", got)
	}
	if v, err := e.store.GetVolume(ctx, "default", "m"); err != nil || !v.Multihost {
		t.Errorf("GetVolume(m) = %+v, %v; want multihost", v, err)
	}
}

// writeMultihostRecord writes the owner record of a multihost volume by
// hand, dated t0.
func (e *testEnv) writeMultihostRecord(t testing.TB, name, owner string) {
	t.Helper()
	e.writeRecordFields(t, name, map[string]any{"owner": owner, "ownedSince": t0.Format(time.RFC3339), "multihost": true})
}
