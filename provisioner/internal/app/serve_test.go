package app

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller/metrics"
)

func TestServe(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	registry := prometheus.NewRegistry()
	m := metrics.New("controller")
	registry.MustRegister(m.PersistentVolumeClaimProvisionFailedTotal)
	m.PersistentVolumeClaimProvisionFailedTotal.WithLabelValues("fast", "").Inc()
	var ready atomic.Bool
	srv, err := serve(ctx, "127.0.0.1:0", registry, &ready)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + srv.Addr

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the caches synced = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the caches synced = %d, want 200", code)
	}
	code, body := get("/metrics")
	if want := `controller_persistentvolumeclaim_provision_failed_total{class="fast",source=""} 1`; code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("/metrics = %d without %q:\n%s", code, want, body)
	}
	if code, _ := get("/other"); code != http.StatusNotFound {
		t.Errorf("/other = %d, want 404", code)
	}
}
