package controller

import (
	"testing"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/api/runtime/dashboardtest"
)

// TestDashboardMetrics: every host definer metric that
// manifests/monitoring/dashboard.json queries is one /metrics serves. The
// names are those the registry describes, built as app.Run builds it from
// NewMetrics, not a list written here.
func TestDashboardMetrics(t *testing.T) {
	d, err := dashboardtest.Load()
	if err != nil {
		t.Fatal(err)
	}
	missing, err := d.Missing(dashboardtest.HostDefiner, component.NewRegistry(NewMetrics()))
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 0 {
		t.Errorf("%s queries %q, which the host definer does not export", dashboardtest.File, missing)
	}
}
