package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework/localcluster"
)

// TestProvisionerReuseStaysInNamespace: a retained directory is reused only
// from its claim's namespace (docs/volumes.md, "Reusing a retained directory"). The
// attack of issue 25: tenant A's claim of class hostpath-retain holds a
// file; A deletes the claim and the administrator deletes the Released PV,
// so the directory stays, retained. Tenant B, in another namespace, names
// it in hostpath.dev/reuse-directory on a claim of class hostpath-immediate
// pinned to its node. B's claim gets a ProvisioningFailed event that says
// the directory belongs to another namespace (without naming it, nor A's
// volume), stays Pending, and the owner record is unchanged; deleting B's
// namespace leaves A's data and record as they were. Then an administrator
// (a manager token allowed to update pools/volumes, which tenants have not)
// hands the directory over to a third namespace with the owner call's
// claimNamespace, and a claim there gets A's data.
func TestProvisionerReuseStaysInNamespace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := setupProvisioner(ctx, t)
	node := a.nodes[0]
	oldPV := a.retainedVolume(ctx, t, node, "data", "secret-of-a")
	dir := oldPV.Annotations[annPVDirectory]
	a.deletePV(ctx, t, oldPV.Name)
	file := a.nodePath(t, node, oldPV, "f")
	checkKept := func(when string) {
		t.Helper()
		if data, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(data)) != "secret-of-a" {
			t.Errorf("%s: A's file %s = %q, %v; want it kept", when, file, data, err)
		}
		rec := a.readOwnerRecord(t, node, localcluster.PoolPath, dir)
		if rec.Owner != oldPV.Name || !rec.Retained || rec.ClaimNamespace != a.ns {
			t.Errorf("%s: owner record of %s = %+v, want A's PV %s, retained, namespace %s", when, dir, rec, oldPV.Name, a.ns)
		}
	}
	checkKept("Retained")

	// Tenant B asks for A's directory.
	b := *a
	b.ns = a.f.Namespace(ctx, t)
	steal := b.claim(ctx, t, "steal", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node, annReuseDirectory: dir})
	ev := b.waitEvent(ctx, t, "steal", corev1.EventTypeWarning, eventProvisioningFail,
		fmt.Sprintf("cannot reuse directory %q in pool %q on node %q from namespace %q: it does not exist, or its owner record does not name this namespace", dir, "default", node, b.ns))
	t.Logf("Event: %s", ev.Message)
	b.checkOneSource(ctx, t, "steal", node)
	// B named the directory (whose default name holds A's namespace and PV
	// name); beyond it, the event must not tell B anything of A.
	rest := strings.ReplaceAll(ev.Message, dir, "")
	for _, secret := range []string{a.ns, oldPV.Name} {
		if strings.Contains(rest, secret) {
			t.Errorf("Event %q names %q, which tenant B must not learn", ev.Message, secret)
		}
	}
	b.checkNoVolume(ctx, t, steal)
	checkKept("After B's claim")

	// B's namespace goes, its claim with it: A's data stays.
	b.f.DeleteNamespace(ctx, t, b.ns, 2*provisionTimeout)
	checkKept("After B's namespace was deleted")

	// The administrator hands the directory over to namespace C.
	c := *a
	c.ns = a.f.Namespace(ctx, t)
	token := roleToken(ctx, t, a.f, a.ns, "admin", managerapi.AdminClusterRole)
	base := managerPods(ctx, t, a.f, a.nodes)[node]
	waitAllowed(ctx, t, base, token, "the administrator's token to be allowed")
	body := fmt.Sprintf(`{"owner":%q,"previous":%q,"retained":true,"claimNamespace":%q}`, oldPV.Name, oldPV.Name, c.ns)
	code, answer := callManager(ctx, t, http.MethodPut, base, "/v1/pools/default/volumes/"+dir+"/owner", token, body)
	if code != http.StatusOK {
		t.Fatalf("Hand-over to %s: %d %s, want 200", c.ns, code, answer)
	}
	if rec := a.readOwnerRecord(t, node, localcluster.PoolPath, dir); rec.Owner != oldPV.Name || !rec.Retained || rec.ClaimNamespace != c.ns {
		t.Errorf("Owner record of %s after the hand-over = %+v, want %s, retained, namespace %s", dir, rec, oldPV.Name, c.ns)
	}
	c.reuseAndRead(ctx, t, node, "handed-over", dir, "secret-of-a")
}
