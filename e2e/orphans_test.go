package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

// orphansReport is what `kubectl hostpath orphans -o json` prints, by the
// documented keys (docs/kubectl-hostpath.md; repeated here on purpose).
type orphansReport struct {
	Token    string           `json:"token"`
	Findings []orphansFinding `json:"findings"`
	Counts   map[string]int   `json:"counts"`
}

// orphansFinding is one finding of an orphansReport.
type orphansFinding struct {
	Node      string `json:"node"`
	Pool      string `json:"pool"`
	Directory string `json:"directory"`
	Finding   string `json:"finding"`
	Detail    string `json:"detail"`
	PV        string `json:"pv"`
	Owner     string `json:"owner"`
}

func (f orphansFinding) String() string {
	return fmt.Sprintf("%s %s %s %s (pv %q, owner %q): %s", f.Node, f.Pool, f.Directory, f.Finding, f.PV, f.Owner, f.Detail)
}

// buildKubectlHostpath builds the plugin from this tree (the hostdefiner
// module) into a temporary folder and returns its path.
func buildKubectlHostpath(ctx context.Context, t *testing.T, f *framework.Framework) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-hostpath")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kubectl-hostpath")
	cmd.Dir = filepath.Join(f.RepoRoot, "hostdefiner")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build kubectl-hostpath: %v\n%s", err, out)
	}
	return bin
}

// runOrphans runs `kubectl-hostpath orphans -o json` against the cluster
// and returns its report and exit status; exit status 2 (an error) fails
// the test.
func runOrphans(ctx context.Context, t *testing.T, f *framework.Framework, bin string) (orphansReport, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "orphans", "--kubeconfig", f.Kubeconfig, "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("Run kubectl-hostpath orphans: %v", err)
	}
	if code != 0 && code != 1 {
		t.Fatalf("kubectl-hostpath orphans exited %d: %s", code, stderr.String())
	}
	var r orphansReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("kubectl-hostpath orphans -o json printed no report: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return r, code
}

// TestOrphansReport: `kubectl hostpath orphans` reports a directory made
// through the manager for a PV that does not exist (orphan) and a PV whose
// directory was removed by hand (missing) with their node, pool and names,
// exits 1, and deletes nothing.
func TestOrphansReport(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	urls := managerPods(ctx, t, e.f, e.nodes)
	bin := buildKubectlHostpath(ctx, t, e.f)
	// An admin makes the orphan by hand (a token bound to no pod).
	token := roleToken(ctx, t, e.f, e.ns, "orphan-maker", managerapi.AdminClusterRole)
	waitAllowed(ctx, t, urls[node], token, "the orphan maker to be allowed")

	// Missing: a node-mode claim whose directory is then removed on disk.
	pvc := e.claim(ctx, t, "orphans-missing", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if err := os.RemoveAll(e.nodePath(t, node, pv)); err != nil {
		t.Fatal(err)
	}

	// Orphan: a directory whose owner record names a PV that does not
	// exist, holding a file (so that the provisioner's sweeper would keep
	// it too).
	suffix := framework.RandomSuffix()
	orphan, owner := "e2e-orphan-"+suffix, "pvc-e2e-orphan-"+suffix
	volumePath := "/v1/pools/default/volumes/" + orphan
	code, body := callManager(ctx, t, http.MethodPut, urls[node], volumePath, token, `{"owner":"`+owner+`","mode":"0755"}`)
	if code != http.StatusCreated {
		t.Fatalf("PUT %s: %d %s, want 201", volumePath, code, body)
	}
	orphanDir := e.f.MustNodeDir(t, node, path.Join(localcluster.PoolPath, orphan))
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if code, body := callManager(cctx, t, http.MethodDelete, urls[node], volumePath+"?owner="+owner, token, ""); code != http.StatusNoContent {
			t.Errorf("DELETE %s: %d %s, want 204", volumePath, code, body)
		}
		_ = os.RemoveAll(orphanDir)
	})
	keep := filepath.Join(orphanDir, "keep.txt")
	if err := os.WriteFile(keep, []byte("orphaned data\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	r, exit := runOrphans(ctx, t, e.f, bin)
	var all []string
	for _, f := range r.Findings {
		all = append(all, f.String())
	}
	t.Logf("Token: %s\nFindings:\n  %s", r.Token, strings.Join(all, "\n  "))
	if exit != 1 {
		t.Errorf("Exit status %d, want 1 (findings)", exit)
	}
	if want := framework.SystemNamespace + "/" + managerapi.OrphansServiceAccount; !strings.Contains(r.Token, want) {
		t.Errorf("Token %q does not name the read-only service account %s", r.Token, want)
	}
	checkFinding(t, r, orphansFinding{Node: node, Pool: "default", Directory: orphan, Finding: "orphan", Owner: owner})
	checkFinding(t, r, orphansFinding{Node: node, Pool: "default", Directory: pv.Annotations[annPVDirectory], Finding: "missing", PV: pv.Name})
	for _, f := range r.Findings {
		for _, n := range e.nodes {
			if f.Node == n && f.Finding == "unreachable" {
				t.Errorf("The manager of %s, Ready, is reported unreachable: %s", n, f)
			}
		}
	}

	// Nothing was deleted: the orphan and its data are still there.
	if data, err := os.ReadFile(keep); err != nil || string(data) != "orphaned data\n" {
		t.Errorf("The orphan's file after the report = %q, %v; want it kept", data, err)
	}
	if code, body := callManager(ctx, t, http.MethodGet, urls[node], volumePath, token, ""); code != http.StatusOK {
		t.Errorf("GET %s after the report: %d %s, want 200", volumePath, code, body)
	}

	// A PV whose directory is missing still goes with its claim.
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("PV still there (%v)", err)
		}
		return true, nil
	})
}

// checkFinding checks that r has a finding with want's node, pool,
// directory and kind, and want's PV and owner where set.
func checkFinding(t *testing.T, r orphansReport, want orphansFinding) {
	t.Helper()
	for _, f := range r.Findings {
		if f.Node == want.Node && f.Pool == want.Pool && f.Directory == want.Directory && f.Finding == want.Finding {
			if f.PV != want.PV || f.Owner != want.Owner {
				t.Errorf("Finding %s, want PV %q and owner %q", f, want.PV, want.Owner)
			}
			return
		}
	}
	t.Errorf("No finding %s %s %s %s in the report", want.Node, want.Pool, want.Directory, want.Finding)
}
