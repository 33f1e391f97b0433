package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"hostpath.dev/e2e/framework"
)

// TestProvisionerLogLevel: at the DaemonSet's --v=2, the provisioner's log
// (read through the kubelet) says in one line each that it made a claim's
// directory and that its deletion removed it, and does not log the claim's
// events: the provisioner library's broadcaster logs them at V(3), as the
// provisioner's own, and the removal of the finalizer that follows the
// directory's is logged at V(3) too (docs/provisioner.md).
func TestProvisionerLogLevel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	logLines := func() []string {
		t.Helper()
		out, err := e.f.PodLogs(ctx, framework.SystemNamespace, e.instances[node], "")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(out, "\n")
	}
	pvc := e.claim(ctx, t, "logged", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)

	claim := `pvc="` + e.ns + "/" + pvc.Name + `"`
	var made bool
	for _, line := range logLines() {
		if strings.Contains(line, "Event occurred") && strings.Contains(line, e.ns+"/"+pvc.Name) {
			t.Errorf("the provisioner logged an event of the claim at --v=2: %s", line)
		}
		made = made || (strings.Contains(line, "Created the volume directory") && strings.Contains(line, claim) && strings.Contains(line, pv.Name))
	}
	if !made {
		t.Errorf("the log of %s does not say that it made the directory of %s (%s)", e.instances[node], claim, pv.Name)
	}

	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
	var deletion []string
	for _, line := range logLines() {
		if strings.Contains(line, `pv="`+pv.Name+`"`) && !strings.Contains(line, "Created the volume directory") {
			deletion = append(deletion, line)
		}
	}
	if len(deletion) != 1 || !strings.Contains(deletion[0], "Directory reached its final state") || !strings.Contains(deletion[0], "DirectoryRemoved") {
		t.Errorf("the log of %s has %d lines about the deletion of %s, want one that says the directory was removed (DirectoryRemoved):\n%s",
			e.instances[node], len(deletion), pv.Name, strings.Join(deletion, "\n"))
	}
}
