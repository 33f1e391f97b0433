package server

import (
	"os"
	"path/filepath"
	"testing"

	"hostpath.dev/api/managerapi"
)

// TestDeleteOnDisk: on a real disk.Store, a DELETE on a pool that is not
// configured, or whose directory does not exist, is 404 PoolNotFound and
// touches nothing (a caller must not take it for a removed directory); a
// DELETE of a volume that an existing pool does not hold is 204, as often
// as asked.
func TestDeleteOnDisk(t *testing.T) {
	for _, tc := range []struct {
		desc string
		// noRoot serves without a pool root: only pool default.
		noRoot bool
		setup  func(t *testing.T, d diskDirs)
		steps  []diskStep
		// survivors must exist afterwards.
		survivors func(d diskDirs) []string
	}{
		{desc: "pool not configured", noRoot: true,
			steps: []diskStep{{desc: "delete", method: "DELETE", path: "/v1/pools/fast/volumes/v1?owner=pv-a", wantCode: 404,
				wantReason: managerapi.ReasonPoolNotFound, wantInMsg: `pool "fast" is not configured on node "node-a"`}}},
		{desc: "pool no longer configured, its volume still on disk", noRoot: true,
			setup: func(t *testing.T, d diskDirs) {
				mustMkdirAll(t, filepath.Join(d.root, "fast", "v1"))
				mustWriteFile(t, filepath.Join(d.root, "fast", "v1", "data"), "data")
			},
			steps: []diskStep{{desc: "delete", method: "DELETE", path: "/v1/pools/fast/volumes/v1?owner=pv-a", wantCode: 404,
				wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "not configured"}},
			survivors: func(d diskDirs) []string { return []string{filepath.Join(d.root, "fast", "v1", "data")} }},
		{desc: "pool named on the fly not prepared",
			steps: []diskStep{{desc: "delete", method: "DELETE", path: "/v1/pools/fast/volumes/v1?owner=pv-a", wantCode: 404,
				wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "prepare it with PUT /v1/pools/fast"}}},
		{desc: "configured pool without its directory",
			setup: func(t *testing.T, d diskDirs) {
				if err := os.Remove(d.def); err != nil {
					t.Fatal(err)
				}
			},
			steps: []diskStep{
				{desc: "delete", method: "DELETE", path: "/v1/pools/default/volumes/v1?owner=pv-a", wantCode: 404,
					wantReason: managerapi.ReasonPoolNotFound, wantInMsg: "prepare it with PUT /v1/pools/default",
					check: func(t *testing.T, d diskDirs, _ []byte) { mustNotExist(t, d.def) }},
				{desc: "delete if empty", method: "DELETE", path: "/v1/pools/default/volumes/v1?owner=pv-a&ifEmpty=true", wantCode: 404,
					wantReason: managerapi.ReasonPoolNotFound},
			}},
		{desc: "missing volume in an existing pool",
			steps: []diskStep{
				{desc: "delete", method: "DELETE", path: "/v1/pools/default/volumes/v1?owner=pv-a", wantCode: 204},
				{desc: "delete again", method: "DELETE", path: "/v1/pools/default/volumes/v1?owner=pv-a", wantCode: 204},
				{desc: "prepare fast", method: "PUT", path: "/v1/pools/fast", wantCode: 200},
				{desc: "delete in the prepared pool", method: "DELETE", path: "/v1/pools/fast/volumes/v1?owner=pv-a", wantCode: 204},
			}},
		{desc: "volume of the owner",
			steps: []diskStep{
				{desc: "create", method: "PUT", path: "/v1/pools/default/volumes/v1", body: `{"owner":"pv-a"}`, wantCode: 201},
				{desc: "delete", method: "DELETE", path: "/v1/pools/default/volumes/v1?owner=pv-a", wantCode: 204,
					check: func(t *testing.T, d diskDirs, _ []byte) { mustNotExist(t, filepath.Join(d.def, "v1")) }},
				{desc: "get", method: "GET", path: "/v1/pools/default/volumes/v1", wantCode: 404, wantReason: managerapi.ReasonNotFound},
			}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := newDiskDirs(t)
			if tc.setup != nil {
				tc.setup(t, d)
			}
			root := d.root
			if tc.noRoot {
				root = ""
			}
			d.run(t, d.serverWithRoot(t, root), tc.steps)
			if tc.survivors != nil {
				for _, p := range tc.survivors(d) {
					if _, err := os.Lstat(p); err != nil {
						t.Errorf("%s was removed: %v", p, err)
					}
				}
			}
		})
	}
}

// TestSetOwnerReclaimPolicyOnDisk: PUT .../owner with a reclaimPolicy
// records it, whether or not the owner changes, and GET shows it; without
// one the same owner keeps the recorded policy and a new owner has none;
// an invalid policy is 400 and changes nothing.
func TestSetOwnerReclaimPolicyOnDisk(t *testing.T) {
	const v1 = "/v1/pools/default/volumes/v1"
	d := newDiskDirs(t)
	d.run(t, d.server(t), []diskStep{
		{desc: "create with Delete", method: "PUT", path: v1, body: `{"owner":"pv-a","reclaimPolicy":"Delete"}`, wantCode: 201,
			check: checkOwnerRecord("pv-a", false, managerapi.ReclaimDelete)},
		{desc: "retain with policy Retain", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-a","previous":"pv-a","retained":true,"reclaimPolicy":"Retain"}`, wantCode: 200,
			check: checkOwnerRecord("pv-a", true, managerapi.ReclaimRetain)},
		{desc: "get shows Retain", method: "GET", path: v1, wantCode: 200, check: checkOwnerRecord("pv-a", true, managerapi.ReclaimRetain)},
		{desc: "same owner without a policy keeps it", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-a","previous":"pv-a","retained":true}`, wantCode: 200,
			check: checkOwnerRecord("pv-a", true, managerapi.ReclaimRetain)},
		{desc: "get still shows Retain", method: "GET", path: v1, wantCode: 200, check: checkOwnerRecord("pv-a", true, managerapi.ReclaimRetain)},
		{desc: "hand over without a policy clears it", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-b","previous":"pv-a"}`, wantCode: 200,
			check: checkOwnerRecord("pv-b", false, "")},
		{desc: "get shows no policy", method: "GET", path: v1, wantCode: 200, check: checkOwnerRecord("pv-b", false, "")},
		{desc: "invalid policy", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-b","previous":"pv-b","reclaimPolicy":"Recycle"}`, wantCode: 400,
			wantReason: managerapi.ReasonBadRequest, wantInMsg: "reclaimPolicy"},
		{desc: "get after the invalid policy", method: "GET", path: v1, wantCode: 200, check: checkOwnerRecord("pv-b", false, "")},
		{desc: "hand over with Delete", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-c","previous":"pv-b","reclaimPolicy":"Delete"}`, wantCode: 200,
			check: checkOwnerRecord("pv-c", false, managerapi.ReclaimDelete)},
		{desc: "get shows Delete", method: "GET", path: v1, wantCode: 200, check: checkOwnerRecord("pv-c", false, managerapi.ReclaimDelete)},
		{desc: "list shows Delete", method: "GET", path: "/v1/pools/default/volumes", wantCode: 200,
			check: func(t *testing.T, _ diskDirs, body []byte) {
				var l managerapi.VolumeList
				if mustUnmarshal(t, body, &l); len(l.Items) != 1 || l.Items[0].ReclaimPolicy != managerapi.ReclaimDelete {
					t.Errorf("volumes = %+v, want v1 with reclaim policy Delete", l.Items)
				}
			}},
		{desc: "set owner in a pool not prepared", method: "PUT", path: "/v1/pools/fast/volumes/v1/owner", body: `{"owner":"pv-a","reclaimPolicy":"Delete"}`, wantCode: 404,
			wantReason: managerapi.ReasonPoolNotFound},
	})
}

// TestSetOwnerClaimNamespaceOnDisk: a create records its claimNamespace
// and GET shows it; PUT .../owner with a claimNamespace changes it for the
// same owner (an administrator's hand-over to another namespace) and
// without one keeps it; a new owner without one gets none; an invalid
// namespace is 400 and changes nothing.
func TestSetOwnerClaimNamespaceOnDisk(t *testing.T) {
	const v1 = "/v1/pools/default/volumes/v1"
	d := newDiskDirs(t)
	d.run(t, d.server(t), []diskStep{
		{desc: "create in team-a", method: "PUT", path: v1, body: `{"owner":"pv-a","reclaimPolicy":"Retain","claimNamespace":"team-a"}`, wantCode: 201,
			check: checkClaimNamespace("pv-a", "team-a")},
		{desc: "retain keeps it", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-a","previous":"pv-a","retained":true,"reclaimPolicy":"Retain"}`, wantCode: 200,
			check: checkClaimNamespace("pv-a", "team-a")},
		{desc: "get shows team-a", method: "GET", path: v1, wantCode: 200, check: checkClaimNamespace("pv-a", "team-a")},
		{desc: "invalid namespace", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-a","previous":"pv-a","retained":true,"claimNamespace":"Team B"}`, wantCode: 400,
			wantReason: managerapi.ReasonBadRequest, wantInMsg: "claimNamespace"},
		{desc: "get after the invalid namespace", method: "GET", path: v1, wantCode: 200, check: checkClaimNamespace("pv-a", "team-a")},
		{desc: "hand over to team-b", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-a","previous":"pv-a","retained":true,"claimNamespace":"team-b"}`, wantCode: 200,
			check: checkClaimNamespace("pv-a", "team-b")},
		{desc: "list shows team-b", method: "GET", path: "/v1/pools/default/volumes", wantCode: 200,
			check: func(t *testing.T, _ diskDirs, body []byte) {
				var l managerapi.VolumeList
				if mustUnmarshal(t, body, &l); len(l.Items) != 1 || l.Items[0].ClaimNamespace != "team-b" || !l.Items[0].Retained {
					t.Errorf("volumes = %+v, want v1 retained for team-b", l.Items)
				}
			}},
		{desc: "a new owner without a namespace gets none", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-b","previous":"pv-a"}`, wantCode: 200,
			check: checkClaimNamespace("pv-b", "")},
		{desc: "a new owner with its namespace", method: "PUT", path: v1 + "/owner", body: `{"owner":"pv-c","previous":"pv-b","claimNamespace":"team-b"}`, wantCode: 200,
			check: checkClaimNamespace("pv-c", "team-b")},
	})
}

// checkClaimNamespace checks that a volume body names owner and claim
// namespace ns.
func checkClaimNamespace(owner, ns string) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, _ diskDirs, body []byte) {
		t.Helper()
		var v managerapi.Volume
		if mustUnmarshal(t, body, &v); v.Owner != owner || v.ClaimNamespace != ns {
			t.Errorf("volume = %+v, want owner %s, claim namespace %q", v, owner, ns)
		}
	}
}

// checkOwnerRecord checks that a volume body names owner, retained and
// reclaim policy policy.
func checkOwnerRecord(owner string, retained bool, policy string) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, _ diskDirs, body []byte) {
		t.Helper()
		var v managerapi.Volume
		if mustUnmarshal(t, body, &v); v.Owner != owner || v.Retained != retained || v.ReclaimPolicy != policy {
			t.Errorf("volume = %+v, want owner %s, retained %t, reclaim policy %q", v, owner, retained, policy)
		}
	}
}

func mustMkdirAll(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWriteFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
