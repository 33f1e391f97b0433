package server

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review/reviewtest"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/auth/authtest"
)

// TestNodeScopedAuthority drives node-a's manager, on a real disk.Store,
// with a real auth.Reviewer over the callers of reviewtest.NewCallers: a
// token of a pod on node-b changes no node-mode volume of node-a (403
// naming both nodes, the directory untouched), and a multihost one only
// with pools/multihostvolumes; the host definer cannot delete; a token
// bound to no pod reads, and writes only as an admin; a pod that is gone
// writes nothing. The multihost claims default/claim-m and default/claim-m3
// (of class shared, mode multihost) exist; pvc-m3 does not exist yet, and
// pvc-m, of capacity 1Mi (the size a remote resize may grow m1 to), is
// Released with reclaim policy Delete (so a remote delete may remove m1).
func TestNodeScopedAuthority(t *testing.T) {
	d := newDiskDirs(t)
	api := reviewtest.NewCallers()
	cs := api.Clientset()
	pvM := pvOf("pvc-m", "m1", "claim-m", corev1.VolumeReleased)
	pvM.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}
	addObjects(t, cs, classOf("shared", "multihost"), claimOf("default", "claim-m", "m", "shared"), claimOf("default", "claim-m3", "m3", "shared"), pvM)
	e := &env{srv: d.newServerOwners(t, "", authtest.NewReviewer(cs, auth.DefaultOptions()), ownersOf(cs, nil))}
	bothNodes := mentions(`"node-a"`, `"node-b"`)
	n1 := filepath.Join(d.def, "n1")
	d.run(t, e, []diskStep{
		{desc: "same-node create", token: "prov-a", method: "PUT", path: "/v1/pools/default/volumes/n1", body: `{"owner":"pv-n"}`, wantCode: 201},
		{desc: "cross-node delete of a node-mode volume", token: "prov-b", method: "DELETE", path: "/v1/pools/default/volumes/n1?owner=pv-n",
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: "node-mode volume", check: all(bothNodes, exists(n1))},
		{desc: "cross-node delete without the multihost permission", token: "client-b", method: "DELETE", path: "/v1/pools/default/volumes/n1?owner=pv-n",
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: "pools/multihostvolumes", check: all(bothNodes, exists(n1))},
		{desc: "cross-node resize of a node-mode volume", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/n1/size", body: `{"owner":"pv-n","sizeBytes":1048576}`,
			wantCode: 403, wantReason: managerapi.ReasonForbidden, check: bothNodes},
		{desc: "cross-node re-own of a node-mode volume", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/n1/owner", body: `{"owner":"pv-x","previous":"pv-n"}`,
			wantCode: 403, wantReason: managerapi.ReasonForbidden, check: bothNodes},
		{desc: "cross-node create in node mode", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/n2", body: `{"owner":"pv-n2"}`,
			wantCode: 403, wantReason: managerapi.ReasonForbidden, check: all(bothNodes, absent(filepath.Join(d.def, "n2")))},
		{desc: "cross-node multihost create", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/m1",
			body: `{"owner":"pvc-m","multihost":true,"claimNamespace":"default","claimName":"claim-m"}`, wantCode: 201},
		{desc: "cross-node multihost resize", token: "prov-b", method: "PUT", path: "/v1/pools/default/volumes/m1/size", body: `{"owner":"pvc-m","sizeBytes":1048576}`, wantCode: 200},
		{desc: "cross-node multihost create without the multihost permission", token: "client-b", method: "PUT", path: "/v1/pools/default/volumes/m2", body: `{"owner":"pvc-m2","multihost":true,"claimNamespace":"default","claimName":"claim-m2"}`,
			wantCode: 403, wantReason: managerapi.ReasonForbidden, check: all(bothNodes, absent(filepath.Join(d.def, "m2")))},
		{desc: "host definer backfills a multihost volume", token: "definer-b", method: "PUT", path: "/v1/pools/default/volumes/m3",
			body: `{"owner":"pvc-m3","multihost":true,"claimNamespace":"default","claimName":"claim-m3"}`, wantCode: 201},
		{desc: "host definer prepares the pool", token: "definer-b", method: "PUT", path: "/v1/pools/default", wantCode: 200},
		{desc: "host definer cannot delete", token: "definer-b", method: "DELETE", path: "/v1/pools/default/volumes/m3?owner=pvc-m3",
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: "cannot delete pools/volumes", check: exists(filepath.Join(d.def, "m3"))},
		{desc: "the listing says which volumes are multihost", token: "prov-b", method: "GET", path: "/v1/pools/default/volumes", wantCode: 200,
			check: checkList("m1 pvc-m multihost,m3 pvc-m3 multihost,n1 pv-n")},
		{desc: "cross-node multihost delete", token: "prov-b", method: "DELETE", path: "/v1/pools/default/volumes/m1?owner=pvc-m", wantCode: 204,
			check: absent(filepath.Join(d.def, "m1"))},
		{desc: "unbound reader lists", token: "reader-unbound", method: "GET", path: "/v1/pools/default/volumes", wantCode: 200},
		{desc: "unbound reader cannot create", token: "reader-unbound", method: "PUT", path: "/v1/pools/default/volumes/r1", body: `{"owner":"pv-r"}`,
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: "cannot create pools/volumes"},
		{desc: "unbound token reads", token: "client-unbound", method: "GET", path: "/v1/pools/default/volumes/n1", wantCode: 200},
		{desc: "unbound token without the admin role cannot delete", token: "client-unbound", method: "DELETE", path: "/v1/pools/default/volumes/n1?owner=pv-n",
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: managerapi.AdminClusterRole, check: exists(n1)},
		{desc: "a gone pod's token cannot write", token: "prov-gone", method: "DELETE", path: "/v1/pools/default/volumes/n1?owner=pv-n",
			wantCode: 403, wantReason: managerapi.ReasonForbidden, wantInMsg: "no longer exists", check: exists(n1)},
		{desc: "same-node delete of a multihost volume", token: "prov-a", method: "DELETE", path: "/v1/pools/default/volumes/m3?owner=pvc-m3", wantCode: 204},
		{desc: "unbound admin deletes", token: "admin-unbound", method: "DELETE", path: "/v1/pools/default/volumes/n1?owner=pv-n", wantCode: 204,
			check: absent(n1)},
	})
}

// all runs every check.
func all(checks ...func(t *testing.T, d diskDirs, body []byte)) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, d diskDirs, body []byte) {
		for _, c := range checks {
			c(t, d, body)
		}
	}
}

// mentions checks that the error's message has every one of texts.
func mentions(texts ...string) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, _ diskDirs, body []byte) {
		var st managerapi.Status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		for _, want := range texts {
			if !strings.Contains(st.Message, want) {
				t.Errorf("message %q does not name %s", st.Message, want)
			}
		}
	}
}

// exists checks that path is still there.
func exists(path string) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, _ diskDirs, _ []byte) { mustExist(t, path) }
}

// absent checks that path is not there.
func absent(path string) func(t *testing.T, d diskDirs, body []byte) {
	return func(t *testing.T, _ diskDirs, _ []byte) { mustNotExist(t, path) }
}
