package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller/metrics"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/provisioner/internal/fanout"
	"hostpath.dev/provisioner/internal/usage"
)

// TestHealthAndMetrics checks what --metrics-address serves: liveness,
// readiness once the caches synced, and the library's metrics from the
// registry Complete builds, with the fan-out and volume usage metrics.
func TestHealthAndMetrics(t *testing.T) {
	m := metrics.New("controller")
	m.PersistentVolumeClaimProvisionFailedTotal.WithLabelValues("fast", "").Inc()
	var ready atomic.Bool
	mux := http.NewServeMux()
	f := fanout.NewMetrics()
	f.Observe(fanout.OperationCreate, fanout.Results{Nodes: []fanout.Result{{Node: "n1"}}})
	component.HealthHandlers(mux, newRegistry(m, f, usage.NewMetrics()), &ready, nil)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	steps := []struct {
		path     string
		ready    bool
		wantCode int
		wantBody string
	}{
		{path: "/healthz", wantCode: http.StatusOK},
		{path: "/readyz", wantCode: http.StatusServiceUnavailable}, // before the caches synced
		{path: "/readyz", ready: true, wantCode: http.StatusOK},
		{path: "/metrics", ready: true, wantCode: http.StatusOK, wantBody: `controller_persistentvolumeclaim_provision_failed_total{class="fast",source=""} 1`},
		{path: "/metrics", ready: true, wantCode: http.StatusOK, wantBody: `hostpath_provisioner_fanout_node_results_total{operation="create",result="ok"} 1`},
		{path: "/metrics", ready: true, wantCode: http.StatusOK, wantBody: `hostpath_provisioner_fanout_duration_seconds_count{operation="create"} 1`},
		{path: "/other", ready: true, wantCode: http.StatusNotFound},
	}
	for _, s := range steps {
		ready.Store(s.ready)
		resp, err := http.Get(srv.URL + s.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != s.wantCode || !strings.Contains(string(body), s.wantBody) {
			t.Errorf("GET %s (ready %v) = %d without %q:\n%.2000s", s.path, s.ready, resp.StatusCode, s.wantBody, body)
		}
	}
}
