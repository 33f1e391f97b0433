package foreign

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	hostpathv1 "hostpath.dev/api/hostpath/v1"

	"hostpath.dev/tools/internal/fleet"
)

func TestReadyOn(t *testing.T) {
	def := func(node, pool string, phase hostpathv1.Phase, deleting bool) hostpathv1.HostDefinition {
		hd := hostpathv1.HostDefinition{Spec: hostpathv1.HostDefinitionSpec{NodeName: node, Pool: pool}}
		hd.Status.Phase = phase
		if deleting {
			hd.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return hd
	}
	defs := []hostpathv1.HostDefinition{
		def("f1", "default", hostpathv1.PhaseReady, false),
		def("f1", "fast", hostpathv1.PhaseReady, false),
		def("f2", "default", hostpathv1.PhaseReady, true),
		def("f3", "default", "Pending", false),
		def("real-1", "default", hostpathv1.PhaseReady, false),
		def("f4", "fast", hostpathv1.PhaseReady, false),
	}
	for _, tc := range []struct {
		pool  string
		nodes []string
		want  int
	}{
		{"default", []string{"f1", "f2", "f3", "f4"}, 1},
		{"fast", []string{"f1", "f2", "f3", "f4"}, 2},
		{"default", nil, 0},
	} {
		if got := readyOn(defs, tc.pool, tc.nodes); got != tc.want {
			t.Errorf("readyOn(%s, %v) = %d, want %d", tc.pool, tc.nodes, got, tc.want)
		}
	}
}

func TestClaim(t *testing.T) {
	c := claim(42)
	if c.Name != "foreign-000042" || *c.Spec.StorageClassName != ClassName || c.Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Errorf("claim %+v", c)
	}
	kept, err := metadataOnly(&corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", Annotations: map[string]string{annStorageProvisioner: Provisioner}, Labels: map[string]string{"x": "y"}},
		Spec:       c.Spec,
	})
	k, ok := kept.(*corev1.PersistentVolumeClaim)
	if err != nil || !ok || k.Name != "a" || k.Annotations[annStorageProvisioner] != Provisioner || k.Spec.StorageClassName != nil || k.Labels != nil {
		t.Errorf("metadataOnly = %+v, %v", kept, err)
	}
	if other, _ := metadataOnly("x"); other != "x" {
		t.Errorf("metadataOnly of another object = %v", other)
	}
}

func TestFirstError(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		errs []error
		want string
	}{
		{nil, ""},
		{[]error{nil, nil}, ""},
		{[]error{nil, boom, errors.New("bang")}, "2 of 3 failed, the first: boom"},
	} {
		err := firstError(tc.errs)
		if got := ""; err != nil {
			got = err.Error()
			if !errors.Is(err, boom) {
				t.Errorf("%v does not wrap the first error", err)
			}
			if got != tc.want {
				t.Errorf("firstError = %q, want %q", got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("firstError = nil, want %q", tc.want)
		}
	}
}

// TestFlags checks the defaults and the validation of the options.
func TestFlags(t *testing.T) {
	var f runFlags
	fs := flag.NewFlagSet("foreign", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.AddFlags(fs)
	if err := fs.Parse([]string{"--dir", "/d", "--manager-bin", "m", "--provisioner-bin", "p", "--provisioner-args", `["--a=1"]`}); err != nil {
		t.Fatal(err)
	}
	if err := f.Complete(); err != nil {
		t.Fatal(err)
	}
	o := f.o
	if o.Claims != 0 || o.Instances != 100 || o.Settle != 30*time.Second || o.Pool != "default" || len(o.Fleet.ProvisionerArgs) != 1 ||
		o.Volumes != 1000 || o.MultihostVolumes != 20 {
		t.Errorf("defaults %+v", o)
	}
	o.Fleet.Server = "https://x"
	for _, tc := range []struct {
		name string
		edit func(*Options)
		err  string
	}{
		{"ok", func(o *Options) { o.Claims = 50000 }, ""},
		{"off", func(*Options) {}, "claims"},
		{"too many", func(o *Options) { o.Claims, o.Instances = 1, fleet.MaxMembers+1 }, "instances"},
		{"settle", func(o *Options) { o.Claims, o.Settle = 1, -time.Second }, "settle"},
		{"fleet", func(o *Options) { o.Claims, o.Fleet.Dir = 1, "" }, "folder"},
		{"volumes off", func(o *Options) { o.Claims, o.Volumes, o.MultihostVolumes = 1, 0, 0 }, ""},
		{"negative volumes", func(o *Options) { o.Claims, o.Volumes = 1, -1 }, "volumes"},
		{"negative multihost volumes", func(o *Options) { o.Claims, o.MultihostVolumes = 1, -1 }, "multihost volumes"},
	} {
		oo := o
		tc.edit(&oo)
		err := oo.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.err)
		}
	}
	f = runFlags{o: Options{Volumes: -1}, fleet: fleet.Flags{ProvisionerArgs: "[]"}}
	if err := f.Complete(); err == nil || !strings.Contains(err.Error(), "--volumes -1") {
		t.Errorf("Complete of --volumes -1 = %v", err)
	}
	f = runFlags{fleet: fleet.Flags{ProvisionerArgs: "nope"}}
	if err := f.Complete(); err == nil {
		t.Error("Complete took provisioner arguments that are not JSON")
	}
}

// TestHeartbeat checks that heartbeat moves the Ready condition's
// lastHeartbeatTime of its Node, and only that.
func TestHeartbeat(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	now := then.Add(90 * time.Minute)
	node := func(name string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"k": "v"}}}
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "Fine", LastHeartbeatTime: then, LastTransitionTime: then},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "FakeNodeReady", Message: "fake", LastHeartbeatTime: then, LastTransitionTime: then},
		}
		return n
	}
	for _, tc := range []struct {
		name, node string
		notFound   bool
	}{
		{"first node", "f1", false},
		{"second node", "f2", false},
		{"missing", "f9", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(node("f1"), node("f2"))
			err := heartbeat(context.Background(), kube, tc.node, now)
			if tc.notFound {
				if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "Node f9") {
					t.Fatalf("heartbeat of a missing Node = %v, want a not found error naming it", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"f1", "f2"} {
				got, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := node(name)
				if name == tc.node {
					want.Status.Conditions[1].LastHeartbeatTime = metav1.NewTime(now)
				}
				if !equality.Semantic.DeepEqual(got.Status, want.Status) || !equality.Semantic.DeepEqual(got.Labels, want.Labels) {
					t.Errorf("Node %s status %+v, want %+v", name, got.Status, want.Status)
				}
			}
		})
	}
}
