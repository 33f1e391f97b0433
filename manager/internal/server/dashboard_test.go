package server

import (
	"testing"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/dashboardtest"
)

// TestDashboardMetrics: every manager metric that
// manifests/monitoring/dashboard.json queries is one /metrics serves. The
// names are those the registry describes, built as New builds it from the
// server's collectors, not a list written here.
func TestDashboardMetrics(t *testing.T) {
	d, err := dashboardtest.Load()
	if err != nil {
		t.Fatal(err)
	}
	missing, err := d.Missing(dashboardtest.Manager, component.NewRegistry(append(newMetrics().collectors(), newUsageCollector(nil))...))
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 0 {
		t.Errorf("%s queries %q, which the manager does not export", dashboardtest.File, missing)
	}
}
