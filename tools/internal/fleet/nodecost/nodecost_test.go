package nodecost

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	hpfake "hostpath.dev/api/generated/clientset/versioned/fake"
	hostpathv1 "hostpath.dev/api/hostpath/v1"

	"hostpath.dev/e2e/framework/localcluster"
	"hostpath.dev/tools/internal/fleet"
)

func TestValidate(t *testing.T) {
	good := func() Options {
		return Options{Namespace: "hostpath-system", Prefix: "n-", Steps: []int{10, 20}, Settle: time.Second, Readings: 1, Pool: "default", Workers: 1}
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		ok   bool
	}{
		{"good", func(*Options) {}, true},
		{"no steps", func(o *Options) { o.Steps = nil }, false},
		{"steps not increasing", func(o *Options) { o.Steps = []int{20, 20} }, false},
		{"zero nodes", func(o *Options) { o.Steps = []int{0, 5} }, false},
		{"more nodes than addresses", func(o *Options) { o.Steps = []int{16384} }, false},
		{"the most nodes", func(o *Options) { o.Steps = []int{16383} }, true},
		{"no reading", func(o *Options) { o.Readings = 0 }, false},
		{"negative settle", func(o *Options) { o.Settle = -time.Second }, false},
		{"no pool", func(o *Options) { o.Pool = "" }, false},
		{"no workers", func(o *Options) { o.Workers = 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.edit(&o)
			if err := o.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestCompleteParsesNodes(t *testing.T) {
	f := runFlags{o: Options{Namespace: "ns", Prefix: "p", Settle: time.Second, Readings: 1, Pool: "default", Workers: 1}, steps: "1000, 5000"}
	if err := f.Complete(); err != nil {
		t.Fatal(err)
	}
	if len(f.o.Steps) != 2 || f.o.Steps[0] != 1000 || f.o.Steps[1] != 5000 {
		t.Errorf("steps %v, want [1000 5000]", f.o.Steps)
	}
	f.steps = "1000,x"
	if err := f.Complete(); err == nil {
		t.Error("--nodes 1000,x accepted")
	}
}

func TestAddress(t *testing.T) {
	for i, want := range map[int]string{1: "198.18.128.1", 256: "198.18.129.0", 5000: "198.18.147.136", 16383: "198.18.191.255"} {
		if got := address(i); got != want {
			t.Errorf("address(%d) = %s, want %s", i, got, want)
		}
	}
}

func template() *hostpathv1.HostDefinition {
	return &hostpathv1.HostDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "default.real-1", ResourceVersion: "7", UID: "u"},
		Spec:       hostpathv1.HostDefinitionSpec{NodeName: "real-1", Pool: "default"},
		Status: hostpathv1.HostDefinitionStatus{
			Phase: hostpathv1.PhaseReady, PoolPath: "/var/hpvolumes", ManagerPod: "hostpath-manager-abc", ManagerPodUID: "m-uid",
			Conditions: []metav1.Condition{{Type: "Defined", Status: metav1.ConditionTrue, Reason: "Defined", Message: "defined"}},
		},
	}
}

func TestDefinitionCopiesTheTemplateForTheNode(t *testing.T) {
	tpl := template()
	manager := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-manager-fake-3", UID: "fake-uid"}}
	d := Definition(tpl, "fake-3", manager)
	if d.Name != "default.fake-3" || d.Spec.NodeName != "fake-3" || d.Spec.Pool != "default" {
		t.Errorf("definition %s of node %s, pool %s; want default.fake-3 of fake-3, default", d.Name, d.Spec.NodeName, d.Spec.Pool)
	}
	if d.Labels[fleet.FleetLabel] != "true" || d.ResourceVersion != "" || d.UID != "" {
		t.Errorf("metadata %+v: want the fleet label and no resource version or UID", d.ObjectMeta)
	}
	if d.Status.ManagerPod != manager.Name || d.Status.ManagerPodUID != manager.UID || d.Status.Phase != hostpathv1.PhaseReady || len(d.Status.Conditions) != 1 {
		t.Errorf("status %+v: want the template's with manager pod %s (%s)", d.Status, manager.Name, manager.UID)
	}
	d.Status.Conditions[0].Message = "changed"
	if tpl.Status.Conditions[0].Message != "defined" || tpl.Spec.NodeName != "real-1" || tpl.Status.ManagerPod != "hostpath-manager-abc" {
		t.Errorf("the template changed: %+v", tpl)
	}
}

// TestWrite writes two steps of fake nodes with fake clientsets: each node
// with its two Ready pods and its HostDefinition.
func TestWrite(t *testing.T) {
	ctx := context.Background()
	kube, hp := fake.NewClientset(), hpfake.NewSimpleClientset()
	o := Options{Namespace: "hostpath-system", Prefix: "fake-", Steps: []int{2, 3}, Readings: 1, Pool: "default", Workers: 2}
	own := fleet.Owner(o.Namespace)
	own.UID = "owner-uid"
	w := &writer{kube: kube, hp: hp, o: o, own: own, template: template()}
	if err := w.write(ctx, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := w.write(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	nodes, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(nodes.Items) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes.Items))
	}
	for i, name := range []string{"fake-1", "fake-2", "fake-3"} {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[localcluster.FakeNodeLabel] != "true" || len(n.Spec.Taints) != 1 || len(n.Status.Conditions) != 0 {
			t.Errorf("node %s: labels %v, taints %v, conditions %v; want fake, tainted, never Ready", name, n.Labels, n.Spec.Taints, n.Status.Conditions)
		}
		var manager *corev1.Pod
		for _, r := range []fleet.Role{fleet.RoleProvisioner, fleet.RoleManager} {
			p, err := kube.CoreV1().Pods(o.Namespace).Get(ctx, fleet.PodName(r, name), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Spec.NodeName != name || p.Status.PodIP != address(i+1) || p.Status.Phase != corev1.PodRunning || p.OwnerReferences[0].UID != own.UID {
				t.Errorf("pod %s: node %s, IP %s, phase %s, owner %v", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase, p.OwnerReferences)
			}
			manager = p
		}
		d, err := hp.HostpathV1().HostDefinitions().Get(ctx, "default."+name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.NodeName != name || d.Status.Phase != hostpathv1.PhaseReady || d.Status.ManagerPod != manager.Name {
			t.Errorf("definition %s: node %s, phase %s, manager pod %s", d.Name, d.Spec.NodeName, d.Status.Phase, d.Status.ManagerPod)
		}
	}
}

func TestCostsAndReport(t *testing.T) {
	before := []fleet.NodeUsage{
		{Node: "real-1", Usage: fleet.Usage{PID: 10, RSSMiB: 33, AnonMiB: 8}},
		{Node: "real-2", Usage: fleet.Usage{PID: 20, RSSMiB: 34, AnonMiB: 9}},
	}
	r := Reading{AfterSeconds: 180, Real: []fleet.NodeUsage{
		{Node: "real-1", Usage: fleet.Usage{PID: 10, RSSMiB: 43, AnonMiB: 16}},
		{Node: "real-2", Usage: fleet.Usage{PID: 21, RSSMiB: 30, AnonMiB: 6}}, // restarted
	}}
	costs := Costs(before, r, 1000)
	if len(costs) != 2 {
		t.Fatalf("costs %+v", costs)
	}
	if c := costs[0]; !c.OK || c.RSSPer100 != 1 || c.AnonPer100 != 0.8 {
		t.Errorf("real-1: %+v, want 1.00 and 0.80 MiB per 100 nodes", c)
	}
	if c := costs[1]; c.OK {
		t.Errorf("real-2 restarted, but its cost was read: %+v", c)
	}
	var b bytes.Buffer
	res := Result{Date: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), Pool: "default", Before: before, Steps: []Step{{Nodes: 1000, Readings: []Reading{r}}}}
	if err := Report(&b, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(pool default), no processes, 2026-11-30 06:00 UTC", "real-1 33.0 MiB (anon 8.0, PID 10)", "1.00", "0.80"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if line := lineOf(b.String(), "real-2"); !strings.Contains(line, " -") {
		t.Errorf("real-2's row %q: want - for its per-100 figures", line)
	}
}

// lineOf returns the first line of s after the first one that contains
// sub ("Before: ..." names every node).
func lineOf(s, sub string) string {
	lines := strings.Split(s, "\n")
	for _, l := range lines[2:] {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
