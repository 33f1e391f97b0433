package app

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/runtime/component/componenttest"
)

// TestComplete builds the Config of valid Options without an API server
// (the clients connect only once Run starts the informers): the clients,
// the controllers, their informer factories and a registry with the
// controller's metrics.
func TestComplete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPodNamespace, "hostpath-system")
	o := NewOptions()
	if err := componenttest.Validate(t, o, "--kubeconfig="+kubeconfig, "--max-tries=3"); err != nil {
		t.Fatal(err)
	}
	c, err := o.Complete(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Broadcaster.Shutdown()
	if c.Kube == nil || c.HostPath == nil || c.Controller == nil || c.Certificates == nil || c.Classes == nil || c.Bundle == nil || c.MetricsGuard == nil {
		t.Errorf("Complete left parts out: %+v", c)
	}
	if c.MaxTries != 3 || c.Namespace != "hostpath-system" {
		t.Errorf("Config options: max tries %d, namespace %q; want the Options'", c.MaxTries, c.Namespace)
	}
	// Nodes, classes; the multihost volumes (by label); pods, DaemonSets;
	// HostDefinitions; the ConfigMap of the classes; CSRs, the CA Secret,
	// the bundle ConfigMap.
	if len(c.factories) != 8 {
		t.Errorf("%d informer factories, want 8", len(c.factories))
	}
	families, err := c.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		found = found || f.GetName() == "hostdefiner_definitions"
	}
	if !found {
		t.Errorf("the registry has no hostdefiner_definitions")
	}
}
