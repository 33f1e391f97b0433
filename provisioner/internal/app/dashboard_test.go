package app

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/runtime/dashboardtest"
)

// TestDashboardMetrics: every provisioner metric that
// manifests/monitoring/dashboard.json queries (the fan-out's and
// sig-storage-lib-external-provisioner's) is one /metrics serves. The names
// are those that the Registry of Complete describes, not a list written
// here; Complete makes API clients but does not call the API server.
func TestDashboardMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.Kubeconfig, o.NodeName, o.Namespace, o.ManagerNamespace = kubeconfig, "n1", "hostpath-system", "hostpath-system"
	c, err := o.Complete(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Broadcaster.Shutdown)
	d, err := dashboardtest.Load()
	if err != nil {
		t.Fatal(err)
	}
	missing, err := d.Missing(dashboardtest.Provisioner, c.Registry)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 0 {
		t.Errorf("%s queries %q, which the provisioner does not export", dashboardtest.File, missing)
	}
	// The volume gauges have no series before a refresh; the registry
	// describes them all the same.
	described, err := dashboardtest.Described(c.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hostpath_provisioner_volume_used_bytes", "hostpath_provisioner_volume_capacity_bytes"} {
		if !described[name] {
			t.Errorf("the registry does not describe %s", name)
		}
	}
}
