package e2e

import (
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"hostpath.dev/e2e/framework"
)

// TestProvisionerLogLevel: at the DaemonSet's --v=2, the provisioner's log
// (read through the kubelet) says that it made a claim's directory, and
// does not log the claim's events: the provisioner library's broadcaster
// logs them at V(3), as the provisioner's own (docs/provisioner.md).
func TestProvisionerLogLevel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pvc := e.claim(ctx, t, "logged", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)

	rc, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).GetLogs(e.instances[node], &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		t.Fatalf("read the log of %s: %v", e.instances[node], err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read the log of %s: %v", e.instances[node], err)
	}
	claim := `pvc="` + e.ns + "/" + pvc.Name + `"`
	var made bool
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "Event occurred") && strings.Contains(line, e.ns+"/"+pvc.Name) {
			t.Errorf("the provisioner logged an event of the claim at --v=2: %s", line)
		}
		made = made || (strings.Contains(line, "Created the volume directory") && strings.Contains(line, claim) && strings.Contains(line, pv.Name))
	}
	if !made {
		t.Errorf("the log of %s does not say that it made the directory of %s (%s)", e.instances[node], claim, pv.Name)
	}
}
