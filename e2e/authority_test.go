package e2e

// Node-scoped authority and least privilege for each caller (issue 25,
// items 1 and 2; docs/security.md), against the managers of the two
// real nodes. Each test asserts the HTTP answer and that every node's pools
// hold what they held before (hostileSnapshot, hostileCheckDisk), and,
// where a volume was aimed at, that its owner record did not change either.
//
//   - TestAuthorityCrossNode: a token bound to the provisioner's pod on one
//     node (as `kubectl create token --bound-object-kind Pod` makes it) cannot
//     delete, grow, re-own or create node-mode volumes on the other node's
//     manager (403 naming both nodes), can create and delete a multihost
//     one there, and the provisioners' own multihost fan-out still creates
//     and deletes a multihost claim's directory on every node.
//   - TestAuthorityHostDefinerCannotDelete: the host definer's pod-bound
//     token reads and prepares pools, and its DELETE is 403 on every node.
//   - TestAuthorityReader: hostpath-manager-reader (and the service account
//     hostpath-orphans, bound to it) lists and gets, and nothing more.
//   - TestAuthorityUnboundToken: a token bound to no pod reads with
//     hostpath-manager-client but writes nothing (403 naming
//     hostpath-manager-admin); with hostpath-manager-admin it does the
//     debugging writes of docs/api.md.

import (
	"context"
	"net/http"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

// authorityCall is one manager call of these tests and the answer it must
// get: wantCode, and for an error wantReason and texts its message has.
type authorityCall struct {
	method, path, body string
	wantCode           int
	wantReason         string
	wantInMsg          []string
}

// authorityCalls makes each call on the manager at base with token.
func authorityCalls(ctx context.Context, t *testing.T, base, token string, calls []authorityCall) {
	t.Helper()
	for _, c := range calls {
		code, body := callManager(ctx, t, c.method, base, c.path, token, c.body)
		what := c.method + " " + c.path
		if c.wantReason == "" {
			if code != c.wantCode {
				t.Errorf("%s: %d %s, want %d", what, code, body, c.wantCode)
			}
			continue
		}
		st := wantStatus(t, what, code, body, c.wantCode, c.wantReason)
		for _, want := range c.wantInMsg {
			if !strings.Contains(st.Message, want) {
				t.Errorf("%s: message %q does not contain %q", what, st.Message, want)
			}
		}
	}
}

// ownerRecordFile is the owner record of volume dir of the pool at
// poolPath on node, as this machine sees it.
func ownerRecordFile(t *testing.T, f *framework.Framework, node, poolPath, dir string) string {
	t.Helper()
	return f.MustNodeDir(t, node, path.Join(poolPath, ".hostpath", "owners", dir))
}

// readRecord returns the bytes of the owner record of dir of the default
// pool on node.
func readRecord(t *testing.T, f *framework.Framework, node, dir string) string {
	t.Helper()
	data, err := os.ReadFile(ownerRecordFile(t, f, node, localcluster.PoolPath, dir))
	if err != nil {
		t.Fatalf("Owner record of %s on %s: %v", dir, node, err)
	}
	return string(data)
}

// waitMultihostRecord waits until the owner record of dir on node says
// multihost: at once for a volume made by this version, after the node's
// provisioner started for one made before records kept the mode.
func waitMultihostRecord(ctx context.Context, t *testing.T, f *framework.Framework, node, dir string) {
	t.Helper()
	framework.WaitFor(ctx, t, provisionTimeout, "the owner record of "+dir+" on "+node+" to say multihost", func(context.Context) (bool, error) {
		rec, err := readRecordFile(ownerRecordFile(t, f, node, localcluster.PoolPath, dir))
		return rec.Multihost, err
	})
}

// podToken is a manager token bound to pod.
func podToken(ctx context.Context, t *testing.T, f *framework.Framework, pod *corev1.Pod) string {
	t.Helper()
	token, err := f.PodBoundToken(ctx, pod, managerapi.TokenAudience)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// provisionerTokenOn returns the manager token of the provisioner pod of
// node here, once the manager of node there (at urls[there]) reads with
// it.
func provisionerTokenOn(ctx context.Context, t *testing.T, f *framework.Framework, urls map[string]string, here, there string) string {
	t.Helper()
	provisioner := f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, provisionerSelector, []string{here}, provisionTimeout)[here]
	token := podToken(ctx, t, f, provisioner)
	waitAllowed(ctx, t, urls[there], token, "the provisioner of "+here+" to read on "+there)
	return token
}

// TestAuthorityCrossNode: the cross-node delete, and every other
// write of a node-mode volume, with the provisioner's token of one node on
// the other node's manager.
func TestAuthorityCrossNode(t *testing.T) {
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	here, there := e.nodes[0], e.nodes[1]
	urls := managerPods(ctx, t, e.f, e.nodes)

	// A node-mode volume of the other node, made by its provisioner.
	pvc := e.claim(ctx, t, "theirs", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: there})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	dir := pv.Annotations[annPVDirectory]
	if err := os.WriteFile(e.nodePath(t, there, pv, "data"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	token := provisionerTokenOn(ctx, t, e.f, urls, here, there)

	before := hostileSnapshot(t, e.f, e.nodes)
	record := readRecord(t, e.f, there, dir)
	volume := "/v1/pools/default/volumes/" + dir
	stray := "/v1/pools/default/volumes/e2e-authz-" + framework.RandomSuffix()
	both := []string{`"` + here + `"`, `"` + there + `"`}
	authorityCalls(ctx, t, urls[there], token, []authorityCall{
		{method: "DELETE", path: volume + "?owner=" + pv.Name, wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: append(both, "node-mode volume")},
		{method: "PUT", path: volume + "/size", body: `{"owner":"` + pv.Name + `","sizeBytes":2097152}`, wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: both},
		{method: "PUT", path: volume + "/owner", body: `{"owner":"pv-e2e-thief","previous":"` + pv.Name + `"}`, wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: both},
		{method: "PUT", path: volume + "/owner", body: `{"owner":"` + pv.Name + `","previous":"` + pv.Name + `","multihost":true}`, wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: both},
		{method: "PUT", path: volume, body: `{"owner":"` + pv.Name + `","multihost":true,"mode":"0700"}`, wantCode: http.StatusBadRequest, wantReason: "BadRequest",
			wantInMsg: append(both, "only for a claim it names")},
		{method: "PUT", path: stray, body: `{"owner":"pv-e2e-authz"}`, wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: append(both, "only multihost volumes")},
	})
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
	if got := readRecord(t, e.f, there, dir); got != record {
		t.Errorf("The owner record of %s on %s changed:\n%s\nwant\n%s", dir, there, got, record)
	}
	if data, err := os.ReadFile(e.nodePath(t, there, pv, "data")); err != nil || string(data) != "theirs\n" {
		t.Errorf("The data of %s on %s = %q, %v", dir, there, data, err)
	}

	// Not even a multihost volume without a claim: another node creates a
	// copy only for a multihost claim it names, which exists.
	authorityCalls(ctx, t, urls[there], token, []authorityCall{
		{method: "PUT", path: stray, body: `{"owner":"pv-e2e-authz","multihost":true}`, wantCode: http.StatusBadRequest, wantReason: "BadRequest",
			wantInMsg: []string{"only for a claim it names: claimNamespace and claimName are required"}},
		{method: "PUT", path: stray, body: `{"owner":"pv-e2e-authz","multihost":true,"claimNamespace":"` + e.ns + `","claimName":"nobody"}`, wantCode: http.StatusConflict, wantReason: "Conflict",
			wantInMsg: []string{"claim " + e.ns + "/nobody does not exist"}},
	})
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)

	// And end to end: the provisioners' fan-out, with their projected
	// tokens, still makes and removes a multihost claim's directory on
	// every node, whichever instance is elected.
	shared := e.claim(ctx, t, "shared", classShared, "1Mi", corev1.ReadWriteMany, nil)
	shared, spv := e.waitBound(ctx, t, shared.Name)
	e.checkMultihostPV(t, shared, spv)
	for _, node := range e.nodes {
		if fi, err := os.Stat(e.nodePath(t, node, spv)); err != nil || !fi.IsDir() {
			t.Errorf("The multihost directory on %s: %v", node, err)
		}
		waitMultihostRecord(ctx, t, e.f, node, spv.Annotations[annPVDirectory])
	}
	e.deleteAndWaitGone(ctx, t, "", shared.Name)
	e.waitGoneEverywhere(ctx, t, spv)

	// The other node's own provisioner still removes its node-mode volume.
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// TestAuthorityHostDefinerCannotDelete: the host definer holds exactly the
// calls it makes; a DELETE with its pod-bound token is 403 on every node,
// and the multihost directory it aims at stays.
func TestAuthorityHostDefinerCannotDelete(t *testing.T) {
	ctx := t.Context()
	e := setupMultihost(ctx, t)
	urls := managerPods(ctx, t, e.f, e.nodes)
	pvc := e.claim(ctx, t, "kept", classShared, "1Mi", corev1.ReadWriteMany, nil)
	_, pv := e.waitBound(ctx, t, pvc.Name)
	dir := pv.Annotations[annPVDirectory]

	token := podToken(ctx, t, e.f, e.hostDefinerPod(ctx, t, false))
	before := hostileSnapshot(t, e.f, e.nodes)
	for _, node := range e.nodes {
		waitAllowed(ctx, t, urls[node], token, "the host definer to read on "+node)
		authorityCalls(ctx, t, urls[node], token, []authorityCall{
			{method: "GET", path: "/v1/pools/default/volumes", wantCode: http.StatusOK},
			{method: "PUT", path: "/v1/pools/default", wantCode: http.StatusOK},
			{method: "DELETE", path: "/v1/pools/default/volumes/" + dir + "?owner=" + pv.Name, wantCode: http.StatusForbidden, wantReason: "Forbidden",
				wantInMsg: []string{"cannot delete pools/volumes"}},
			{method: "PUT", path: "/v1/pools/default/volumes/" + dir + "/size", body: `{"owner":"` + pv.Name + `","sizeBytes":2097152}`,
				wantCode: http.StatusForbidden, wantReason: "Forbidden"},
		})
		if _, err := os.Stat(e.nodePath(t, node, pv)); err != nil {
			t.Errorf("The directory of %s on %s: %v", pv.Name, node, err)
		}
	}
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// TestAuthorityReader: the read-only ClusterRole, and the orphans
// report's service account bound to it, list and get; every write is 403
// and changes nothing.
func TestAuthorityReader(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	urls := managerPods(ctx, t, e.f, e.nodes)
	pvc := e.claim(ctx, t, "read", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	dir := pv.Annotations[annPVDirectory]

	reader := roleToken(ctx, t, e.f, e.ns, "reader", managerapi.ReaderClusterRole)
	orphans, err := e.f.ServiceAccountToken(ctx, framework.SystemNamespace, managerapi.OrphansServiceAccount, managerapi.TokenAudience)
	if err != nil {
		t.Fatal(err)
	}
	volume := "/v1/pools/default/volumes/" + dir
	before := hostileSnapshot(t, e.f, e.nodes)
	record := readRecord(t, e.f, node, dir)
	for who, token := range map[string]string{"reader": reader, managerapi.OrphansServiceAccount: orphans} {
		waitAllowed(ctx, t, urls[node], token, who+" to read")
		authorityCalls(ctx, t, urls[node], token, []authorityCall{
			{method: "GET", path: "/v1/host", wantCode: http.StatusOK},
			{method: "GET", path: "/v1/pools/default/volumes", wantCode: http.StatusOK},
			{method: "GET", path: volume, wantCode: http.StatusOK},
			{method: "PUT", path: "/v1/pools/default", wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: []string{"update pools"}},
			{method: "PUT", path: "/v1/pools/default/volumes/e2e-reader", body: `{"owner":"pv-e2e-reader"}`, wantCode: http.StatusForbidden, wantReason: "Forbidden",
				wantInMsg: []string{"create pools/volumes"}},
			{method: "PUT", path: volume + "/owner", body: `{"owner":"pv-e2e-reader","previous":"` + pv.Name + `"}`, wantCode: http.StatusForbidden, wantReason: "Forbidden"},
			{method: "PUT", path: volume + "/size", body: `{"owner":"` + pv.Name + `","sizeBytes":2097152}`, wantCode: http.StatusForbidden, wantReason: "Forbidden"},
			{method: "DELETE", path: volume + "?owner=" + pv.Name, wantCode: http.StatusForbidden, wantReason: "Forbidden", wantInMsg: []string{"delete pools/volumes"}},
		})
	}
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
	if got := readRecord(t, e.f, node, dir); got != record {
		t.Errorf("The owner record of %s changed:\n%s\nwant\n%s", dir, got, record)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
}

// TestAuthorityUnboundToken: `kubectl create token SA --audience
// hostpath.dev/manager`, bound to no pod, reads with the provisioner's
// ClusterRole but writes nothing; bound to hostpath-manager-admin it does
// the debugging writes of docs/api.md on the node ("Trying it with curl").
func TestAuthorityUnboundToken(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	urls := managerPods(ctx, t, e.f, e.nodes)

	unbound := roleToken(ctx, t, e.f, e.ns, "client", managerapi.ClientClusterRole)
	waitAllowed(ctx, t, urls[node], unbound, "an unbound token to read")
	name := "e2e-debug-" + framework.RandomSuffix()
	volume := "/v1/pools/default/volumes/" + name
	before := hostileSnapshot(t, e.f, e.nodes)
	authorityCalls(ctx, t, urls[node], unbound, []authorityCall{
		{method: "GET", path: "/v1/pools/default/volumes", wantCode: http.StatusOK},
		{method: "PUT", path: volume, body: `{"owner":"demo-pv","mode":"0750"}`, wantCode: http.StatusForbidden, wantReason: "Forbidden",
			wantInMsg: []string{"bound to no pod", "hosts/admin", managerapi.AdminClusterRole}},
	})
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)

	admin := roleToken(ctx, t, e.f, e.ns, "admin", managerapi.AdminClusterRole)
	waitAllowed(ctx, t, urls[node], admin, "the admin to read")
	here := e.f.MustNodeDir(t, node, path.Join(localcluster.PoolPath, name))
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = callManager(cctx, t, "DELETE", urls[node], volume+"?owner=other-pv", admin, "")
		_ = os.RemoveAll(here)
	})
	authorityCalls(ctx, t, urls[node], admin, []authorityCall{
		{method: "PUT", path: volume, body: `{"owner":"demo-pv","mode":"0750"}`, wantCode: http.StatusCreated},
		{method: "GET", path: volume, wantCode: http.StatusOK},
		{method: "PUT", path: volume + "/size", body: `{"owner":"demo-pv","sizeBytes":1048576}`, wantCode: http.StatusOK},
		{method: "PUT", path: volume + "/owner", body: `{"owner":"other-pv","previous":"demo-pv"}`, wantCode: http.StatusOK},
		{method: "DELETE", path: volume + "?owner=other-pv", wantCode: http.StatusNoContent},
	})
	if _, err := os.Lstat(here); !os.IsNotExist(err) {
		t.Errorf("%s is still on %s after the admin's DELETE (%v)", name, node, err)
	}
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
}

// TestAuthorityTokenOfDeletedPod: a token copied off a pod is worth a write
// only while the pod lives. A pod of the provisioner's service account (in
// the product's namespace, where the managers check pods) creates and
// deletes on its node's manager with a token bound to it; once the pod is
// deleted, the same token (which the manager's TokenReview cache still
// holds) is refused a write with 403 saying the pod no longer exists, and
// nothing changes on disk.
func TestAuthorityTokenOfDeletedPod(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	urls := managerPods(ctx, t, e.f, e.nodes)
	pod := framework.TestToolsPod(framework.SystemNamespace, "e2e-holder-"+framework.RandomSuffix(), node, "sleep 3600")
	pod.Spec.ServiceAccountName = "hostpath-provisioner"
	if _, err := e.f.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.f.Client.CoreV1().Pods(pod.Namespace).Delete(cctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	pod = e.f.WaitForPodRunning(ctx, t, pod.Namespace, pod.Name, provisionTimeout)
	token := podToken(ctx, t, e.f, pod)
	waitAllowed(ctx, t, urls[node], token, "the pod's token to read")

	volume := "/v1/pools/default/volumes/e2e-copied-" + framework.RandomSuffix()
	authorityCalls(ctx, t, urls[node], token, []authorityCall{
		{method: "PUT", path: volume, body: `{"owner":"pv-e2e-copied"}`, wantCode: http.StatusCreated},
		{method: "DELETE", path: volume + "?owner=pv-e2e-copied", wantCode: http.StatusNoContent},
	})
	if err := e.f.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "pod "+pod.Name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	before := hostileSnapshot(t, e.f, e.nodes)
	// The manager remembers a live pod for --pod-cache-ttl (10s): the write
	// is refused once that passes.
	var code int
	var body []byte
	framework.WaitFor(ctx, t, time.Minute, "a write with the deleted pod's token to be refused", func(ctx context.Context) (bool, error) {
		code, body = callManager(ctx, t, "PUT", urls[node], volume, token, `{"owner":"pv-e2e-copied"}`)
		if code == http.StatusCreated {
			_, _ = callManager(ctx, t, "DELETE", urls[node], volume+"?owner=pv-e2e-copied", token, "")
		}
		return code != http.StatusCreated, nil
	})
	wantStatus(t, "PUT with the token of a deleted pod", code, body, http.StatusForbidden, "Forbidden")
	if !strings.Contains(string(body), "no longer exists") {
		t.Errorf("the refusal %s does not say the pod no longer exists", body)
	}
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
}
