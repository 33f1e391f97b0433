package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

const managerTimeout = 2 * time.Minute

// managerPods waits until every real node runs a ready manager pod and
// returns their base URLs by node (https://<pod IP>:8443); callManager
// calls each with a TLS client that trusts only the CA bundle and wants
// that node's name.
func managerPods(ctx context.Context, t *testing.T, f *framework.Framework, nodes []string) map[string]string {
	t.Helper()
	urls := map[string]string{}
	for node, p := range f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, managerSelector, nodes, managerTimeout) {
		base := "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(managerapi.ServingPort))
		cfg, err := f.ManagerTLS(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		managerClients.Store(base, &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}})
		urls[node] = base
		healthURLs.Store(base, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(managerapi.HealthPort)))
	}
	return urls
}

// managerClients maps a manager's base URL to its verifying HTTP client;
// healthURLs maps it to the manager's plain health address.
var managerClients, healthURLs sync.Map

// managerHTTP returns the client for the manager at base.
func managerHTTP(t testing.TB, base string) *http.Client {
	t.Helper()
	c, ok := managerClients.Load(base)
	if !ok {
		t.Fatalf("no client for manager %s (managerPods makes them)", base)
	}
	return c.(*http.Client)
}

// healthURL returns the plain health address of the manager at base.
func healthURL(base string) string {
	u, _ := healthURLs.Load(base)
	s, _ := u.(string)
	return s
}

// callManager sends one request, as a well-behaved client does: a 429 is
// sent again after its Retry-After (see sendPatiently). rawPath goes on the
// wire as written.
func callManager(ctx context.Context, t *testing.T, method, base, rawPath, token, body string) (int, []byte) {
	t.Helper()
	return sendPatiently(ctx, t, managerHTTP(t, base), func() (*http.Request, error) {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+rawPath, rd)
		if err == nil && token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req, err
	})
}

// patience bounds how long sendPatiently keeps coming back after 429s.
const patience = 2 * time.Minute

// sendPatiently sends the request newReq builds with c and returns the
// status and body of the first answer that is not 429 Too Many Requests;
// after a 429 it comes back when Retry-After says, for up to patience. The
// e2e suite calls every manager from this machine's one address, in tests
// that run side by side, so it is over the per-address review limits now
// and then, as a busy client would be. A test that wants to see a 429 sends
// its requests itself.
func sendPatiently(ctx context.Context, t *testing.T, c *http.Client, newReq func() (*http.Request, error)) (int, []byte) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		req, err := newReq()
		if err != nil {
			t.Fatalf("Build request: %v", err)
		}
		resp, data := sendOnce(t, c, req)
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			return resp.StatusCode, data
		}
		wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || wait < 1 {
			t.Fatalf("%s %s: 429 without a Retry-After of whole seconds (%q): %s", req.Method, req.URL, resp.Header.Get("Retry-After"), data)
		}
		timer := time.NewTimer(time.Duration(wait) * time.Second)
		select {
		case <-ctx.Done():
			timer.Stop()
			t.Fatalf("%s %s: %v while waiting out a 429", req.Method, req.URL, ctx.Err())
		case <-timer.C:
		}
	}
}

// sendOnce sends req with c and returns the answer with its body read,
// a 429 included.
func sendOnce(t *testing.T, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("Read the answer to %s %s: %v", req.Method, req.URL, err)
	}
	return resp, data
}

// wantStatus checks a JSON error answer.
func wantStatus(t *testing.T, what string, code int, body []byte, wantCode int, wantReason string) managerapi.Status {
	t.Helper()
	var st managerapi.Status
	if code != wantCode {
		t.Fatalf("%s: status %d, want %d; body %s", what, code, wantCode, body)
	}
	if err := json.Unmarshal(body, &st); err != nil || string(st.Reason) != wantReason || st.Message == "" {
		t.Fatalf("%s: body %s, want JSON with reason %s and a message", what, body, wantReason)
	}
	return st
}

// listDir returns the names in dir, sorted ("" when dir is missing).
func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// serviceAccount creates the service account ns/sa.
func serviceAccount(ctx context.Context, t *testing.T, f *framework.Framework, ns, sa string) {
	t.Helper()
	if _, err := f.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create ServiceAccount %s: %v", sa, err)
	}
}

// managerClient makes ns/sa (a new service account) a caller bound to the
// admin ClusterRole, as the debugging recipe of docs/api.md does: its tokens from
// ServiceAccountToken are bound to no pod, which the managers let write
// only as an admin. The binding is deleted when the test ends.
func managerClient(ctx context.Context, t *testing.T, f *framework.Framework, ns, sa string) {
	t.Helper()
	serviceAccount(ctx, t, f, ns, sa)
	bindClusterRole(ctx, t, f, ns, sa, managerapi.AdminClusterRole)
}

// roleToken makes the service account ns/sa, binds it to the ClusterRole
// role until the test ends, and returns a manager token of it (audience
// managerapi.TokenAudience, bound to no pod).
func roleToken(ctx context.Context, t *testing.T, f *framework.Framework, ns, sa, role string) string {
	t.Helper()
	serviceAccount(ctx, t, f, ns, sa)
	bindClusterRole(ctx, t, f, ns, sa, role)
	token, err := f.ServiceAccountToken(ctx, ns, sa, managerapi.TokenAudience)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// bindClusterRole binds the existing service account ns/sa to the
// ClusterRole role until the test ends.
func bindClusterRole(ctx context.Context, t *testing.T, f *framework.Framework, ns, sa, role string) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa + "-" + role, Labels: map[string]string{"hostpath.dev/e2e": "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}
	if _, err := f.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create ClusterRoleBinding: %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.Client.RbacV1().ClusterRoleBindings().Delete(cctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("Delete ClusterRoleBinding %s: %v", binding.Name, err)
		}
	})
}

// managerCallers makes two service accounts of ns, "allowed" (bound to the
// admin ClusterRole, see managerClient) and "denied" (not), and returns a
// manager token of each.
func managerCallers(ctx context.Context, t *testing.T, f *framework.Framework, ns string) (allowed, denied string) {
	t.Helper()
	allowed = roleToken(ctx, t, f, ns, "allowed", managerapi.AdminClusterRole)
	serviceAccount(ctx, t, f, ns, "denied")
	denied, err := f.ServiceAccountToken(ctx, ns, "denied", managerapi.TokenAudience)
	if err != nil {
		t.Fatal(err)
	}
	return allowed, denied
}

// waitAllowed waits until the manager at base answers GET /v1/host with 200
// to token: RBAC changes reach the API server's authorizer within moments
// (the bound is generous: the tests running alongside share this
// machine's review budget at the manager, and 429s are waited out).
func waitAllowed(ctx context.Context, t *testing.T, base, token, what string) {
	t.Helper()
	framework.WaitFor(ctx, t, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
		code, body := callManager(ctx, t, "GET", base, "/v1/host", token, "")
		if code != http.StatusOK {
			return false, fmt.Errorf("status %d: %s", code, body)
		}
		return true, nil
	})
}

// managerVolume is a fresh volume name of the default pool, with where its
// directory would be on this machine for the node called and for the other
// node.
type managerVolume struct {
	name, hostPath, here, there string
}

// newManagerVolume names a volume for one (sub)test; when it ends the volume
// is deleted through the manager at base (best effort, so that its owner
// record goes too) and its directory removed from both nodes.
func newManagerVolume(t *testing.T, f *framework.Framework, base, token, node, other string) managerVolume {
	t.Helper()
	v := managerVolume{name: "e2e-" + framework.RandomSuffix()}
	v.hostPath = path.Join(localcluster.PoolPath, v.name)
	v.here, v.there = f.MustNodeDir(t, node, v.hostPath), f.MustNodeDir(t, other, v.hostPath)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/v1/pools/default/volumes/"+v.name+"?owner=pv-"+v.name, nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+token)
			if resp, err := managerHTTP(t, base).Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
		_ = os.RemoveAll(v.here)
		_ = os.RemoveAll(v.there)
	})
	return v
}

// owner is the body of a PUT that creates v with mode 0750 for the PV
// "pv-<name>".
func (v managerVolume) owner() string { return `{"mode":"0750","owner":"pv-` + v.name + `"}` }

// TestManager calls the managers of the real nodes like curl would: no
// token, a token without the RBAC rule, an authorised token; it creates and
// deletes volumes and checks the node's pool on this machine. Each subtest
// makes what it needs (run one with -run 'TestManager/<name>').
func TestManager(t *testing.T) {
	t.Parallel()
	f := framework.Cluster()
	ctx := t.Context()
	nodes := f.TwoRealNodes(ctx, t)
	ns := f.Namespace(ctx, t)
	urls := managerPods(ctx, t, f, nodes)
	node, other := nodes[0], nodes[1]
	base := urls[node]

	// Two service accounts: one bound to the client ClusterRole, one not.
	allowed, denied := managerCallers(ctx, t, f, ns)
	for _, n := range nodes {
		waitAllowed(ctx, t, urls[n], allowed, "GET /v1/host on "+n+" to be allowed")
	}

	t.Run("healthz needs no token", func(t *testing.T) {
		resp, err := http.Get(healthURL(base) + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if code := resp.StatusCode; code != http.StatusOK {
			t.Fatalf("GET /healthz: %d %s", code, body)
		}
	})

	t.Run("no token is 401", func(t *testing.T) {
		code, body := callManager(ctx, t, "GET", base, "/v1/host", "", "")
		st := wantStatus(t, "GET /v1/host without a token", code, body, http.StatusUnauthorized, "Unauthorized")
		if !strings.Contains(st.Message, "token") {
			t.Errorf("401 message does not say why: %q", st.Message)
		}
	})

	t.Run("forged token is 401", func(t *testing.T) {
		code, body := callManager(ctx, t, "GET", base, "/v1/host", "not-a-token", "")
		wantStatus(t, "GET /v1/host with a forged token", code, body, http.StatusUnauthorized, "Unauthorized")
	})

	t.Run("token without the RBAC rule is 403", func(t *testing.T) {
		code, body := callManager(ctx, t, "GET", base, "/v1/host", denied, "")
		st := wantStatus(t, "GET /v1/host as "+ns+"/denied", code, body, http.StatusForbidden, "Forbidden")
		for _, want := range []string{"system:serviceaccount:" + ns + ":denied", "get", "hosts", "hostpath.dev"} {
			if !strings.Contains(st.Message, want) {
				t.Errorf("403 message %q does not name %q", st.Message, want)
			}
		}
		code, body = callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/e2e-denied", denied, `{"owner":"pv-e2e"}`)
		st = wantStatus(t, "PUT a volume as "+ns+"/denied", code, body, http.StatusForbidden, "Forbidden")
		for _, want := range []string{"create", "pools/volumes", `"default"`} {
			if !strings.Contains(st.Message, want) {
				t.Errorf("403 message %q does not name %q", st.Message, want)
			}
		}
	})

	t.Run("authorised token gets the host", func(t *testing.T) {
		hostIDs := map[string]string{}
		for _, n := range nodes {
			var h managerapi.Host
			code, body := callManager(ctx, t, "GET", urls[n], "/v1/host", allowed, "")
			if code != http.StatusOK {
				t.Fatalf("GET /v1/host on %s: status %d: %s", n, code, body)
			}
			if err := json.Unmarshal(body, &h); err != nil {
				t.Fatalf("GET /v1/host on %s: %v", n, err)
			}
			// Pools are sorted by name: others (btrfs, of the suite's
			// install) may come before "default".
			i := slices.IndexFunc(h.Pools, func(p managerapi.Pool) bool { return p.Name == "default" })
			if h.NodeName != n || h.HostID == "" || h.BootID == "" || i < 0 || h.Pools[i].Path != localcluster.PoolPath || h.Pools[i].FreeBytes <= 0 {
				t.Errorf("GET /v1/host on %s = %+v", n, h)
			}
			hostIDs[n] = h.HostID
		}
		if hostIDs[node] == hostIDs[other] {
			t.Errorf("Both nodes report host ID %s", hostIDs[node])
		}
		hostIDFile := f.MustNodeDir(t, node, path.Join(localcluster.StatePath, "host-id"))
		if data, err := os.ReadFile(hostIDFile); err != nil || strings.TrimSpace(string(data)) != hostIDs[node] {
			t.Errorf("host ID of %s is not persisted in its state directory: %q, %v", node, data, err)
		}
	})

	t.Run("PUT creates the directory on that node only", func(t *testing.T) {
		v := newManagerVolume(t, f, base, allowed, node, other)
		code, body := callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+v.name, allowed, v.owner())
		if code != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", v.name, code, body)
		}
		var got managerapi.Volume
		if err := json.Unmarshal(body, &got); err != nil || got.Path != v.hostPath || got.Mode != "0750" {
			t.Errorf("PUT answered %s", body)
		}
		fi, err := os.Lstat(v.here)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s is not a directory on %s (%s): %v", v.hostPath, node, v.here, err)
		}
		if fi.Mode().Perm() != 0o750 {
			t.Errorf("%s has mode %v, want 0750", v.here, fi.Mode().Perm())
		}
		if _, err := os.Lstat(v.there); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s appeared on %s too (%s): %v", v.hostPath, other, v.there, err)
		}
		code, body = callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+v.name, allowed, v.owner())
		if code != http.StatusOK {
			t.Errorf("second PUT %s: %d %s, want 200", v.name, code, body)
		}
		code, body = callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+v.name, allowed, `{"owner":"pv-someone-else"}`)
		if st := wantStatus(t, "PUT by another owner", code, body, http.StatusConflict, "OwnerConflict"); st.Owner != "pv-"+v.name {
			t.Errorf("409 names owner %q, want %q", st.Owner, "pv-"+v.name)
		}
		code, body = callManager(ctx, t, "GET", base, "/v1/pools/default/volumes", allowed, "")
		if code != http.StatusOK || !strings.Contains(string(body), `"name":"`+v.name+`"`) {
			t.Errorf("GET volumes: %d %s", code, body)
		}
	})

	t.Run("DELETE removes it", func(t *testing.T) {
		v := newManagerVolume(t, f, base, allowed, node, other)
		if code, body := callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+v.name, allowed, v.owner()); code != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", v.name, code, body)
		}
		if err := os.WriteFile(filepath.Join(v.here, "data"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, body := callManager(ctx, t, "DELETE", base, "/v1/pools/default/volumes/"+v.name+"?owner=pv-someone-else", allowed, "")
		wantStatus(t, "DELETE by another owner", code, body, http.StatusConflict, "OwnerConflict")
		if _, err := os.Stat(filepath.Join(v.here, "data")); err != nil {
			t.Fatalf("DELETE by another owner touched the data: %v", err)
		}
		for i := 0; i < 2; i++ {
			code, body := callManager(ctx, t, "DELETE", base, "/v1/pools/default/volumes/"+v.name+"?owner=pv-"+v.name, allowed, "")
			if code != http.StatusNoContent {
				t.Fatalf("DELETE #%d: %d %s", i+1, code, body)
			}
		}
		if _, err := os.Lstat(v.here); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still exists: %v", v.here, err)
		}
		code, body = callManager(ctx, t, "GET", base, "/v1/pools/default/volumes/"+v.name, allowed, "")
		wantStatus(t, "GET the deleted volume", code, body, http.StatusNotFound, "NotFound")
	})

	t.Run("traversal names are 400 and nothing appears outside", func(t *testing.T) {
		pool := f.MustNodeDir(t, node, localcluster.PoolPath)
		nodeRoot := filepath.Dir(pool) // .cluster/nodes/<node>
		// The pool itself gets volumes of the tests running alongside: it
		// is checked for the names these paths could make in it.
		beforeNode := listDir(t, nodeRoot)
		for _, p := range []string{
			"/v1/pools/default/volumes/..",
			"/v1/pools/default/volumes/%2e%2e",
			"/v1/pools/default/volumes/..%2Fstate",
			"/v1/pools/default/volumes/a%2F..%2F..%2Fescape",
			"/v1/pools/default/volumes/%2Fetc",
			"/v1/pools/default/volumes/.hidden",
			"/v1/pools/default/volumes/a%00b",
			"/v1/pools/..%2F..%2Fetc/volumes/x",
		} {
			for _, method := range []string{"PUT", "DELETE"} {
				code, body := callManager(ctx, t, method, base, p, allowed, "")
				wantStatus(t, method+" "+p, code, body, http.StatusBadRequest, "BadRequest")
			}
		}
		for _, name := range []string{"state", "escape", "etc", ".hidden", "a", "x"} {
			if _, err := os.Lstat(filepath.Join(pool, name)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s appeared in the pool of %s: %v", name, node, err)
			}
		}
		if got := listDir(t, nodeRoot); got != beforeNode {
			t.Errorf("%s changed: %q -> %q", nodeRoot, beforeNode, got)
		}
	})
	t.Run("symlinks planted in the pool are not followed", func(t *testing.T) {
		stateFile := f.MustNodeDir(t, node, path.Join(localcluster.StatePath, "host-id"))
		// A symlink named like a volume, pointing at the manager's state
		// directory, and a volume holding such a symlink, as a pod could
		// leave them.
		link := "e2e-link-" + framework.RandomSuffix()
		linkHere, _ := f.NodeDir(node, path.Join(localcluster.PoolPath, link))
		vol := "e2e-vol-" + framework.RandomSuffix()
		volHere, _ := f.NodeDir(node, path.Join(localcluster.PoolPath, vol))
		t.Cleanup(func() { _ = os.Remove(linkHere); _ = os.RemoveAll(volHere) })
		if err := os.Symlink(localcluster.StatePath, linkHere); err != nil {
			t.Fatal(err)
		}
		code, body := callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+link, allowed, `{"owner":"pv-link"}`)
		wantStatus(t, "PUT a symlink", code, body, http.StatusConflict, "Conflict")
		code, body = callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+link+"/owner", allowed, `{"owner":"pv-link","previous":""}`)
		wantStatus(t, "adopt a symlink", code, body, http.StatusConflict, "Conflict")
		if fi, err := os.Lstat(linkHere); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("the planted symlink was changed: %v %v", fi, err)
		}
		if err := os.MkdirAll(volHere, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(localcluster.StatePath, filepath.Join(volHere, "state")); err != nil {
			t.Fatal(err)
		}
		// A directory made by hand has no owner record: it is adopted first.
		code, body = callManager(ctx, t, "DELETE", base, "/v1/pools/default/volumes/"+vol+"?owner=pv-vol", allowed, "")
		wantStatus(t, "DELETE a directory without an owner record", code, body, http.StatusConflict, "OwnerConflict")
		code, body = callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+vol+"/owner", allowed, `{"owner":"pv-vol","previous":""}`)
		if code != http.StatusOK {
			t.Fatalf("adopt %s: %d %s", vol, code, body)
		}
		code, body = callManager(ctx, t, "DELETE", base, "/v1/pools/default/volumes/"+vol+"?owner=pv-vol", allowed, "")
		if code != http.StatusNoContent {
			t.Fatalf("DELETE a volume holding a symlink out: %d %s", code, body)
		}
		if _, err := os.Lstat(volHere); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still exists: %v", volHere, err)
		}
		if data, err := os.ReadFile(stateFile); err != nil || strings.TrimSpace(string(data)) == "" {
			t.Errorf("the state directory behind the symlink was touched: %s: %q, %v", stateFile, data, err)
		}
	})
}
