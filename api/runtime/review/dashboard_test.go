package review

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"hostpath.dev/api/runtime/dashboardtest"
)

// TestDashboardMetrics: every review metric that
// manifests/monitoring/dashboard.json queries is one a Budget exports. The
// names are those the Budget's collectors describe.
func TestDashboardMetrics(t *testing.T) {
	d, err := dashboardtest.Load()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewBudget(LimitOptions{}).Collectors()...)
	missing, err := d.Missing(dashboardtest.Reviews, reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 0 {
		t.Errorf("%s queries %q, which a Budget does not export", dashboardtest.File, missing)
	}
}
