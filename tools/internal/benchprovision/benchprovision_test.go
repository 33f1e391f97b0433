package benchprovision

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/e2e/framework/localcluster"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		values []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 95, 7 * time.Millisecond},
		{ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 95, 19 * time.Millisecond},
		{ms(1, 2, 3), 100, 3 * time.Millisecond},
	} {
		if got := Percentile(tc.values, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.values, tc.p, got, tc.want)
		}
	}
}

func TestHostDir(t *testing.T) {
	pv := func(node, path string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: map[string]string{hostpathv1.AnnotationNode: node}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path}}},
		}
	}
	// local is pv of a class with volumeType local.
	local := func(node, path string) *corev1.PersistentVolume {
		p := pv(node, path)
		p.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}}
		return p
	}
	for _, p := range []*corev1.PersistentVolume{pv("n1", "/var/hpvolumes/ns-c-pv"), local("n1", "/var/hpvolumes/ns-c-pv")} {
		got, err := HostDir(p, "/x/nodes", "/var/hpvolumes")
		if err != nil || got != "/x/nodes/n1/hpvolumes/ns-c-pv" {
			t.Errorf("HostDir(%+v) = %q, %v", p.Spec.PersistentVolumeSource, got, err)
		}
	}
	for _, bad := range []*corev1.PersistentVolume{
		pv("", "/var/hpvolumes/a"),
		pv("../n", "/var/hpvolumes/a"),
		pv("n1", "/var/other/a"),
		pv("n1", "/var/hpvolumes"),
		pv("n1", "/var/hpvolumes/../a"),
		local("n1", "/var/other/a"),
		local("n1", ""),
		{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{hostpathv1.AnnotationNode: "n1"}}},
	} {
		if got, err := HostDir(bad, "/x/nodes", "/var/hpvolumes"); err == nil {
			t.Errorf("HostDir(%v) = %q, want an error", bad, got)
		}
	}
}

// fakeProvisioner plays the provisioner and the namespace controller on a
// fake clientset: every claim gets a PV, a directory under nodesDir and the
// phase Bound; a deleted namespace takes its PVs and directories along.
func fakeProvisioner(ctx context.Context, t *testing.T, client *fake.Clientset, nodesDir string) {
	claims, err := client.CoreV1().PersistentVolumeClaims("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nss, err := client.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer claims.Stop()
		defer nss.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-claims.ResultChan():
				pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim)
				if !ok || ev.Type != watch.Added {
					continue
				}
				node := pvc.Annotations[hostpathv1.AnnotationProvisionOnNode]
				dir := pvc.Namespace + "-" + pvc.Name
				if err := os.MkdirAll(filepath.Join(nodesDir, node, "hpvolumes", dir), 0o755); err != nil {
					t.Error(err)
				}
				pv := &corev1.PersistentVolume{
					ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(pvc.UID), Annotations: map[string]string{hostpathv1.AnnotationNode: node}},
					Spec: corev1.PersistentVolumeSpec{
						PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/hpvolumes/" + dir}},
						ClaimRef:               &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
					},
				}
				if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
				pvc = pvc.DeepCopy()
				pvc.Status.Phase = corev1.ClaimBound
				if _, err := client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
				}
			case ev := <-nss.ResultChan():
				ns, ok := ev.Object.(*corev1.Namespace)
				if !ok || ev.Type != watch.Deleted {
					continue
				}
				pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Error(err)
					continue
				}
				for _, pv := range pvs.Items {
					if pv.Spec.ClaimRef.Namespace != ns.Name {
						continue
					}
					dir, err := HostDir(&pv, nodesDir, "/var/hpvolumes")
					if err != nil {
						t.Error(err)
					}
					if err := os.Remove(dir); err != nil {
						t.Error(err)
					}
					if err := client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
						t.Error(err)
					}
				}
			}
		}
	}()
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fake-1", Labels: map[string]string{localcluster.FakeNodeLabel: "true"}}},
	)
	// The fake clientset neither generates names nor sets UIDs.
	client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(metav1.Object)
		if obj.GetName() == "" {
			obj.SetName(obj.GetGenerateName() + "abcde")
		}
		obj.SetUID(types.UID(obj.GetNamespace() + "." + obj.GetName()))
		return false, nil, nil
	})
	nodesDir := t.TempDir()
	fakeProvisioner(ctx, t, client, nodesDir)

	// Two reads of the API server's metrics: 20 claim creates in between.
	snapshots := []string{
		"apiserver_request_total{code=\"201\",resource=\"persistentvolumeclaims\",verb=\"POST\"} 5\n",
		"apiserver_request_total{code=\"201\",resource=\"persistentvolumeclaims\",verb=\"POST\"} 25\n",
	}
	o := Options{Label: "ours@x", KCM: "200/400", RunID: "r1", Count: 20, StorageClass: "hostpath-immediate", Size: resource.MustParse("1Mi"),
		Workers: 4, Timeout: 30 * time.Second, NodesDir: nodesDir, PoolPath: "/var/hpvolumes", Poll: 10 * time.Millisecond,
		APIMetrics: func(context.Context) ([]byte, error) {
			s := snapshots[0]
			snapshots = snapshots[1:]
			return []byte(s), nil
		}}
	res, err := Run(ctx, client, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Count != 20 || res.Dirs != 20 || !reflect.DeepEqual(res.Nodes, []string{"n1", "n2"}) || res.Namespace != "hostpath-bench-abcde" ||
		res.KCM != "200/400" || res.Label != "ours@x" {
		t.Errorf("result %+v", res)
	}
	if res.AllPVsSeconds <= 0 || res.AllBoundSeconds <= 0 || res.PVsPerSecond <= 0 || res.BindsPerSecond <= 0 ||
		res.PVsGoneSeconds <= 0 || res.DeletesPerSecond <= 0 || res.LatencyP95Seconds < res.LatencyP50Seconds ||
		res.LatencyMaxSeconds < res.LatencyP95Seconds || res.BoundP95Seconds < res.BoundP50Seconds || res.BoundMaxSeconds < res.BoundP95Seconds {
		t.Errorf("figures %+v", res)
	}
	for name, tl := range map[string][]float64{"pvTimes": res.PVTimes, "boundTimes": res.BoundTimes, "boundLatencies": res.BoundLatencies} {
		if len(tl) != 20 || !sort.Float64sAreSorted(tl) || tl[0] < 0 {
			t.Errorf("%s %v: want 20 ascending times", name, tl)
		}
	}
	if last := res.BoundTimes[19]; math.Abs(last-res.AllBoundSeconds) > 0.001 {
		t.Errorf("last Bound at %v, all Bound after %v", last, res.AllBoundSeconds)
	}
	if want := []apimetrics.RequestCount{{Verb: "POST", Resource: "persistentvolumeclaims", Count: 20}}; !reflect.DeepEqual(res.APIRequests, want) || len(snapshots) != 0 {
		t.Errorf("API requests %+v, want %+v (%d reads left)", res.APIRequests, want, len(snapshots))
	}
	for _, n := range []string{"n1", "n2"} {
		left, err := os.ReadDir(filepath.Join(nodesDir, n, "hpvolumes"))
		if err != nil || len(left) != 0 {
			t.Errorf("node %s: %d directories left (%v)", n, len(left), err)
		}
	}
	claims, err := client.CoreV1().PersistentVolumeClaims(res.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, c := range claims.Items {
		perNode[c.Annotations[hostpathv1.AnnotationProvisionOnNode]]++
	}
	if !reflect.DeepEqual(perNode, map[string]int{"n1": 10, "n2": 10}) {
		t.Errorf("claims per node %v", perNode)
	}
}
