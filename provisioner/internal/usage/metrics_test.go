package usage

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
)

// metricNames are the two gauges, for testutil.
var metricNames = []string{"hostpath_provisioner_volume_used_bytes", "hostpath_provisioner_volume_capacity_bytes"}

// series writes the two gauges' series of claims ("claim used capacity"
// each, in claim order) in the text format.
func series(claims ...string) string {
	var used, capacity strings.Builder
	used.WriteString("# HELP hostpath_provisioner_volume_used_bytes The bytes a volume of this node uses, as its quota counts them, at the last usage refresh (only volumes whose size the pool enforces).\n# TYPE hostpath_provisioner_volume_used_bytes gauge\n")
	capacity.WriteString("# HELP hostpath_provisioner_volume_capacity_bytes The enforced size, the limit, of a volume of this node (only volumes whose size the pool enforces).\n# TYPE hostpath_provisioner_volume_capacity_bytes gauge\n")
	for _, c := range claims {
		f := strings.Fields(c)
		labels := `{namespace="team-a",node="node-a",persistentvolumeclaim="` + f[0] + `"}`
		used.WriteString("hostpath_provisioner_volume_used_bytes" + labels + " " + f[1] + "\n")
		capacity.WriteString("hostpath_provisioner_volume_capacity_bytes" + labels + " " + f[2] + "\n")
	}
	if len(claims) == 0 {
		return ""
	}
	return capacity.String() + used.String()
}

// TestMetrics follows the series of a node's volumes over refreshes: those
// of Bound, enforced volumes appear (multihost ones with this node's
// label), keep their last figures while their pool cannot be listed, and
// go with the PV or its binding.
func TestMetrics(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager(map[string][]managerapi.Volume{testPool: {
		sizedVolume("pv-a-dir", 32*mi, 10*mi), sizedVolume("pv-shared-dir", 64*mi, 2*mi),
		enforced("pv-available-dir", mi), unenforced("pv-plain-dir"),
	}}, nil, nil, nil)
	f := newFixture(t, mgr, nil, nil, []*v1.PersistentVolume{
		newPV("pv-a"),
		newPV("pv-shared", hostpathtest.Multihost(otherNode, selfNode)),
		newPV("pv-available", hostpathtest.Phase(v1.VolumeAvailable), hostpathtest.ReclaimPolicy(v1.PersistentVolumeReclaimDelete)),
		newPV("pv-plain", hostpathtest.Annotation(hostpathv1.AnnotationSizeEnforcement, hostpathv1.EnforcementNone)),
	})
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{
			name: "Bound enforced volumes",
			want: series("pv-a-claim 1.048576e+07 3.3554432e+07", "pv-shared-claim 2.097152e+06 6.7108864e+07"),
		},
		{
			name: "new figures",
			change: func() {
				set(mgr, map[string][]managerapi.Volume{testPool: {sizedVolume("pv-a-dir", 32*mi, 20*mi), sizedVolume("pv-shared-dir", 64*mi, 2*mi)}}, nil, nil, nil)
			},
			want: series("pv-a-claim 2.097152e+07 3.3554432e+07", "pv-shared-claim 2.097152e+06 6.7108864e+07"),
		},
		{
			name: "the last figures while the pool cannot be listed",
			change: func() {
				mgr.Fail(managertest.Failure{Method: managertest.ListVolumes, Pool: testPool, Err: errors.New("connection refused")})
			},
			want: series("pv-a-claim 2.097152e+07 3.3554432e+07", "pv-shared-claim 2.097152e+06 6.7108864e+07"),
		},
		{
			name: "gone with the PV",
			change: func() {
				mgr.ClearFailures()
				if err := f.indexer.Delete(newPV("pv-a")); err != nil {
					t.Fatal(err)
				}
			},
			want: series("pv-shared-claim 2.097152e+06 6.7108864e+07"),
		},
		{
			name: "gone with the binding",
			change: func() {
				if err := f.indexer.Update(newPV("pv-shared", hostpathtest.Multihost(otherNode, selfNode), hostpathtest.Phase(v1.VolumeReleased), hostpathtest.ReclaimPolicy(v1.PersistentVolumeReclaimRetain))); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, s := range steps {
		if s.change != nil {
			s.change()
		}
		_ = f.refresher.refresh(ctx) // failures are the steps'
		if err := testutil.CollectAndCompare(f.metrics, strings.NewReader(s.want), metricNames...); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	}
	// No PV left: no series, and no manager call.
	for _, name := range []string{"pv-shared", "pv-available", "pv-plain"} {
		if err := f.indexer.Delete(newPV(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.refresher.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(f.metrics); n != 0 {
		t.Errorf("%d series without PVs, want none", n)
	}
}

// TestMetricsDuplicateClaim checks that two PVs naming one claim (a
// moment of rebinding) give one series, not a failed scrape.
func TestMetricsDuplicateClaim(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager(map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", mi), enforced("pv-b-dir", 2*mi)}}, nil, nil, nil)
	sameClaim := func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef.Name = "data" }
	f := newFixture(t, mgr, nil, nil, []*v1.PersistentVolume{newPV("pv-a", sameClaim), newPV("pv-b", sameClaim)})
	if err := f.refresher.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(f.metrics, metricNames[0]); n != 1 {
		t.Errorf("%d used series, want 1", n)
	}
}

// TestMetricsNil checks that a Refresher without Metrics refreshes.
func TestMetricsNil(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager(map[string][]managerapi.Volume{testPool: {enforced("pv-a-dir", mi)}}, nil, nil, nil)
	f := newFixture(t, mgr, nil, nil, []*v1.PersistentVolume{newPV("pv-a")}, func(c *Config) { c.Metrics = nil })
	if err := f.refresher.refresh(ctx); err != nil {
		t.Fatal(err)
	}
}
