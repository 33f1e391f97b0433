package disk

import (
	"os"
	"path/filepath"
	"testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
)

// TestBegin: what a volume transaction's begin checks for each intent, in
// its order: the names and the pool, the clone state (idle), the directory
// (existing: NotFound before the record is read), the record, the
// caller's node (remote). The verbs' own tests cover what they do once
// begun.
func TestBegin(t *testing.T) {
	corrupt := func(t *testing.T, e *testEnv) {
		mustMkdir(t, filepath.Join(e.pool, OwnersDir))
		filetest.Write(t, filepath.Join(e.pool, OwnersDir, "v1"), `{"owner": "Not A PV"}`)
	}
	busy := func(t *testing.T, e *testEnv) {
		e.volume(t, "v1")
		e.writeRecord(t, "v1", "pv-a", false)
		e.store.clones.hold("default/v1")
	}
	nodeMode := func(t *testing.T, e *testEnv) {
		e.volume(t, "v1")
		e.writeRecord(t, "v1", "pv-a", false)
	}
	multihost := func(t *testing.T, e *testEnv) {
		e.volume(t, "v1")
		e.writeMultihostRecord(t, "v1", "pv-a")
	}
	for _, tc := range []struct {
		desc       string
		pool, name string // "default" and "v1" when empty
		in         intent
		remote     string
		setup      func(t *testing.T, e *testEnv)
		want       managerapi.Reason
		wantErr    bool // an error without a reason: internal
		wantExists bool
		wantOwner  string // of the record read; "" for none
	}{
		{desc: "invalid volume name", name: "..", in: toRead, want: managerapi.ReasonBadRequest},
		{desc: "invalid pool name", pool: "Pool", in: toRead, want: managerapi.ReasonBadRequest},
		{desc: "pool not configured", pool: "other", in: toDelete, want: managerapi.ReasonPoolNotFound},
		{desc: "pool directory missing", in: toDelete, want: managerapi.ReasonPoolNotFound,
			setup: func(t *testing.T, e *testEnv) {
				if err := os.Remove(e.pool); err != nil {
					t.Fatal(err)
				}
			}},

		{desc: "read of a volume", in: toRead, setup: nodeMode, wantExists: true, wantOwner: "pv-a"},
		{desc: "read of a missing volume", in: toRead, want: managerapi.ReasonNotFound},
		{desc: "read of a record without a directory", in: toRead, want: managerapi.ReasonNotFound,
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-a", false) }},
		{desc: "read of a file", in: toRead, want: managerapi.ReasonConflict,
			setup: func(t *testing.T, e *testEnv) { filetest.Write(t, filepath.Join(e.pool, "v1"), "x") }},
		{desc: "read of a directory without a record", in: toRead, wantExists: true,
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "read of a corrupt record", in: toRead, wantErr: true,
			setup: func(t *testing.T, e *testEnv) {
				e.volume(t, "v1")
				corrupt(t, e)
			}},

		{desc: "a create meets nothing", in: toCreate},
		{desc: "a create meets a record without a directory", in: toCreate, wantOwner: "pv-a",
			setup: func(t *testing.T, e *testEnv) { e.writeRecord(t, "v1", "pv-a", false) }},
		{desc: "a growth needs the directory before the record is read", in: toGrow, want: managerapi.ReasonNotFound, setup: corrupt},
		{desc: "a delete reads the record without a directory", in: toDelete, wantErr: true, setup: corrupt},

		{desc: "a write waits for a clone", in: toDelete, setup: busy, want: managerapi.ReasonConflict},
		{desc: "an owner change waits for a clone", in: toReown, setup: busy, want: managerapi.ReasonConflict},
		{desc: "a read does not wait for a clone", in: toRead, setup: busy, wantExists: true, wantOwner: "pv-a"},
		{desc: "a clone's look at its busy target", in: toClone, setup: busy, wantExists: true, wantOwner: "pv-a"},
		{desc: "a clone's hold on its busy source", in: toHold, setup: busy, wantExists: true, wantOwner: "pv-a"},

		{desc: "this node's caller writes a node-mode volume", in: toDelete, setup: nodeMode, wantExists: true, wantOwner: "pv-a"},
		{desc: "a remote caller may not delete a node-mode volume", in: toDelete, remote: "node-b", setup: nodeMode, want: managerapi.ReasonForbidden},
		{desc: "a remote caller may not grow a node-mode volume", in: toGrow, remote: "node-b", setup: nodeMode, want: managerapi.ReasonForbidden},
		{desc: "a remote caller may not create over a node-mode record", in: toCreate, remote: "node-b", setup: nodeMode, want: managerapi.ReasonForbidden},
		{desc: "a remote clone may not look at a node-mode target", in: toClone, remote: "node-b", setup: nodeMode, want: managerapi.ReasonForbidden},
		{desc: "a remote caller writes a multihost volume", in: toDelete, remote: "node-b", setup: multihost, wantExists: true, wantOwner: "pv-a"},
		{desc: "a remote caller meets a directory without a record", in: toReown, remote: "node-b", wantExists: true,
			setup: func(t *testing.T, e *testEnv) { e.volume(t, "v1") }},
		{desc: "a remote caller reads a node-mode volume", in: toRead, remote: "node-b", setup: nodeMode, wantExists: true, wantOwner: "pv-a"},
		{desc: "a clone's hold leaves the caller to the clone", in: toHold, remote: "node-b", setup: nodeMode, wantExists: true, wantOwner: "pv-a"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newTestEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			pool, name := tc.pool, tc.name
			if pool == "" {
				pool = "default"
			}
			if name == "" {
				name = "v1"
			}
			tx, err := e.store.begin(pool, name, tc.remote, tc.in)
			checkErrOrInternal(t, "begin", err, tc.wantErr, tc.want, "")
			if tc.wantErr {
				return
			}
			if err != nil {
				return
			}
			defer tx.end()
			if tx.exists != tc.wantExists || ownerOf(tx.rec) != tc.wantOwner {
				t.Errorf("begin found exists %v and owner %q, want %v and %q", tx.exists, ownerOf(tx.rec), tc.wantExists, tc.wantOwner)
			}
			if tx.exists && (tx.fi == nil || tx.fi.Name() != name) {
				t.Errorf("begin found directory %v, want the one of %s", tx.fi, name)
			}
		})
	}
}

// TestBeginAgain: a volume is begun again once its transaction ended (a
// clone locks its target more than once), and end releases the lock.
func TestBeginAgain(t *testing.T) {
	e := newTestEnv(t)
	e.volume(t, "v1")
	v, err := e.store.volume("default", "v1", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		tx, err := v.begin(toDelete)
		if err != nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		if !tx.exists {
			t.Errorf("begin %d: the directory is missing", i)
		}
		tx.end()
	}
}
