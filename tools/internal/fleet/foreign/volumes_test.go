package foreign

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"

	"hostpath.dev/tools/internal/fleet"
)

func TestVolumeClaim(t *testing.T) {
	for _, tc := range []struct {
		name, node, wantName, wantClass string
		wantMode                        corev1.PersistentVolumeAccessMode
	}{
		{"node-mode", "real-2", "node-000007", VolumesClass, corev1.ReadWriteOnce},
		{"multihost", "", "multihost-000007", MultihostClass, corev1.ReadWriteMany},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := volumeClaim(7, tc.node)
			if c.Name != tc.wantName || *c.Spec.StorageClassName != tc.wantClass || len(c.Spec.AccessModes) != 1 || c.Spec.AccessModes[0] != tc.wantMode {
				t.Errorf("claim %s of class %s, %v", c.Name, *c.Spec.StorageClassName, c.Spec.AccessModes)
			}
			if got := c.Spec.Resources.Requests.Storage().String(); got != "1Mi" {
				t.Errorf("request %s, want 1Mi", got)
			}
			if got := c.Annotations[hostpathv1.AnnotationProvisionOnNode]; got != tc.node {
				t.Errorf("pinned to %q, want %q", got, tc.node)
			}
		})
	}
}

func TestVolumeClass(t *testing.T) {
	sc := volumeClass(MultihostClass, hostpathv1.ModeMultihost, "fast")
	if sc.Name != MultihostClass || sc.Provisioner != hostpathv1.DefaultProvisionerName || sc.Labels[fleet.FleetLabel] != "true" ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingImmediate || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		sc.Parameters[hostpathv1.ParamMode] != hostpathv1.ModeMultihost || sc.Parameters[hostpathv1.ParamPool] != "fast" {
		t.Errorf("class %+v", sc)
	}
}

func TestVolumeClassesListed(t *testing.T) {
	both := (&Options{Volumes: 1000, MultihostVolumes: 20}).volumeClasses()
	for _, tc := range []struct {
		name    string
		classes map[string]string
		data    map[string]string
		want    bool
	}{
		{"both listed", both, map[string]string{"class." + VolumesClass: "node", "class." + MultihostClass: "multihost", "provisioners": "hostpath.dev/provisioner"}, true},
		{"one missing", both, map[string]string{"class." + VolumesClass: "node"}, false},
		{"wrong mode", both, map[string]string{"class." + VolumesClass: "node", "class." + MultihostClass: "node"}, false},
		{"no ConfigMap data", both, nil, false},
		{"node-mode only", (&Options{Volumes: 5}).volumeClasses(), map[string]string{"class." + VolumesClass: "node"}, true},
		{"step off", (&Options{}).volumeClasses(), nil, true},
	} {
		if got := classesListed(tc.data, tc.classes); got != tc.want {
			t.Errorf("%s: classesListed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// volumeRuns is a baseline over 2 real instances and a run with 100 fleet
// instances: node-mode volumes cost 26 events per volume without the
// fleet and 326 with it (3 pending-state claim events per volume to each
// fleet instance); multihost ones 20 and 520.
func volumeRuns() []VolumesRun {
	return []VolumesRun{
		{Instances: 0, RealInstances: 2,
			Node:      &VolumeWatch{Volumes: 1000, Claims: WatchCounts{Events: 14000, Bytes: 14000 << 10}, PVs: WatchCounts{Events: 12000, Bytes: 12000 << 10}, BoundSeconds: 40, GoneSeconds: 20},
			Multihost: &VolumeWatch{Volumes: 20, Claims: WatchCounts{Events: 200, Bytes: 200 << 10}, PVs: WatchCounts{Events: 200, Bytes: 200 << 10}, BoundSeconds: 4, GoneSeconds: 2}},
		{Instances: 100, RealInstances: 2,
			Node:      &VolumeWatch{Volumes: 1000, Claims: WatchCounts{Events: 314000, Bytes: 314100 << 10}, PVs: WatchCounts{Events: 12000, Bytes: 12000 << 10}, BoundSeconds: 41, GoneSeconds: 22},
			Multihost: &VolumeWatch{Volumes: 20, Claims: WatchCounts{Events: 5200, Bytes: 5200 << 10}, PVs: WatchCounts{Events: 5200, Bytes: 5200 << 10}, BoundSeconds: 30, GoneSeconds: 25}},
	}
}

func TestSummarizeVolumes(t *testing.T) {
	withOnly := volumeRuns()[1:]
	noMultihost := volumeRuns()
	noMultihost[0].Multihost, noMultihost[1].Multihost = nil, nil
	for _, tc := range []struct {
		name            string
		runs            []VolumesRun
		node, multihost *VolumesFigures
	}{
		{"both runs", volumeRuns(),
			&VolumesFigures{Real: 2, Instances: 100, Volumes: 1000, Without: &WatchCounts{Events: 26, Bytes: 26 << 10}, With: &WatchCounts{Events: 326, Bytes: 326.1 * 1024},
				Ratio: 326.0 / 26, PerInstance: &WatchCounts{Events: 3, Bytes: 3.001 * 1024}},
			&VolumesFigures{Real: 2, Instances: 100, Volumes: 20, Without: &WatchCounts{Events: 20, Bytes: 20 << 10}, With: &WatchCounts{Events: 520, Bytes: 520 << 10},
				Ratio: 26, PerInstance: &WatchCounts{Events: 5, Bytes: 5 << 10}}},
		{"baseline only", volumeRuns()[:1],
			&VolumesFigures{Real: 2, Volumes: 1000, Without: &WatchCounts{Events: 26, Bytes: 26 << 10}},
			&VolumesFigures{Real: 2, Volumes: 20, Without: &WatchCounts{Events: 20, Bytes: 20 << 10}}},
		{"fleet only", withOnly,
			&VolumesFigures{Real: 2, Instances: 100, Volumes: 1000, With: &WatchCounts{Events: 326, Bytes: 326.1 * 1024}},
			&VolumesFigures{Real: 2, Instances: 100, Volumes: 20, With: &WatchCounts{Events: 520, Bytes: 520 << 10}}},
		{"no multihost", noMultihost,
			&VolumesFigures{Real: 2, Instances: 100, Volumes: 1000, Without: &WatchCounts{Events: 26, Bytes: 26 << 10}, With: &WatchCounts{Events: 326, Bytes: 326.1 * 1024},
				Ratio: 326.0 / 26, PerInstance: &WatchCounts{Events: 3, Bytes: 3.001 * 1024}},
			nil},
		{"not run", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(Result{Claims: 10, Instances: 100, VolumeRuns: tc.runs})
			for _, c := range []struct {
				name      string
				got, want *VolumesFigures
			}{{"node", s.NodeVolumes, tc.node}, {"multihost", s.MultihostVolumes, tc.multihost}} {
				if !nearFigures(c.got, c.want) {
					t.Errorf("%s: %s", c.name, figuresText(c.got, c.want))
				}
			}
		})
	}
}

// nearFigures compares VolumesFigures to 1e-9.
func nearFigures(a, b *VolumesFigures) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	counts := func(x, y *WatchCounts) bool {
		if x == nil || y == nil {
			return x == y
		}
		return eq(x.Events, y.Events) && eq(x.Bytes, y.Bytes)
	}
	return a.Real == b.Real && a.Instances == b.Instances && a.Volumes == b.Volumes && eq(a.Ratio, b.Ratio) &&
		counts(a.Without, b.Without) && counts(a.With, b.With) && counts(a.PerInstance, b.PerInstance)
}

// figuresText shows got and want as JSON.
func figuresText(got, want *VolumesFigures) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return "got " + string(g) + ", want " + string(w)
}

func TestReportVolumes(t *testing.T) {
	baseline := volumeRuns()[:1]
	for _, tc := range []struct {
		name        string
		volumes, mh int
		runs        []VolumesRun
		want, not   []string
	}{
		{"both runs", 1000, 20, volumeRuns(), []string{
			"hostpath volumes, API server watch events  instances  volumes  claim events  PV events  per volume  KiB per volume  Bound in (s)  gone in (s)\n",
			"node-mode, 0 fleet instances               2          1000     14000         12000      26.0        26.0            40.0          20.0\n",
			"multihost, 0 fleet instances               2          20       200           200        20.0        20.0            4.0           2.0\n",
			"node-mode, 100 fleet instances             102        1000     314000        12000      326.0       326.1           41.0          22.0\n",
			"multihost, 100 fleet instances             102        20       5200          5200       520.0       520.0           30.0          25.0\n",
			"claim and PV watch events per node-mode volume: 2 instances 26.0 (26.0 KiB), 102 instances 326.0 (326.1 KiB) (12.54x); each fleet instance 3.00 (3.00 KiB) per volume (pending-state events)\n",
			"claim and PV watch events per multihost volume: 2 instances 20.0 (20.0 KiB), 102 instances 520.0 (520.0 KiB) (26.00x); each fleet instance 5.00 (5.00 KiB) per volume (every instance watches them)\n",
		}, nil},
		{"baseline only", 1000, 20, baseline, []string{
			"claim and PV watch events per node-mode volume: 2 instances 26.0 (26.0 KiB), - instances - (-); each fleet instance - per volume\n",
		}, []string{"pending-state"}},
		{"no multihost asked", 1000, 0, []VolumesRun{{RealInstances: 2, Node: baseline[0].Node}}, []string{
			"per node-mode volume: 2 instances 26.0",
		}, []string{"multihost"}},
		{"failed before a run", 1000, 20, nil, []string{
			"hostpath volumes (1000 node-mode, 20 multihost): not measured (see the log)\n",
		}, []string{"per node-mode volume"}},
		{"step off", 0, 0, nil, nil, []string{"hostpath volumes", "per node-mode volume"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			res := Result{Provisioner: Provisioner, Claims: 10, Instances: 100, Volumes: tc.volumes, MultihostVolumes: tc.mh, VolumeRuns: tc.runs}
			if err := Report(&buf, res); err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, buf.String())
				}
			}
			for _, not := range tc.not {
				if strings.Contains(buf.String(), not) {
					t.Errorf("report has %q:\n%s", not, buf.String())
				}
			}
		})
	}
}

// TestVolumesJSON checks that the volumes step survives the --out file.
func TestVolumesJSON(t *testing.T) {
	res := Result{Provisioner: Provisioner, Claims: 10, Instances: 100, Volumes: 1000, MultihostVolumes: 20, VolumeRuns: volumeRuns()}
	res.Summary = Summarize(res)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"volumes":1000`, `"multihostVolumes":20`, `"volumeRuns":[{"instances":0,"realInstances":2,"node":{"volumes":1000,"claims":{"events":14000`,
		`"pvs":{"events":12000`, `"boundSeconds":40`, `"nodeVolumes":{"real":2,"instances":100,"volumes":1000,"without":{"events":26`, `"multihostVolumes":{"real":2`, `"ratio":26`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
	checkReportRoundTrip(t, res, b)
}
