package noopprovisioner

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

func testClaim(node string) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-1",
			Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": DefaultProvisionerName}},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("hostpath-bench-noop"),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if node != "" {
		c.Annotations[hostpathv1.AnnotationProvisionOnNode] = node
	}
	return c
}

func testClass(policy *v1.PersistentVolumeReclaimPolicy) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "hostpath-bench-noop"},
		Provisioner:       DefaultProvisionerName,
		ReclaimPolicy:     policy,
		MountOptions:      []string{"ro"},
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// wantPV is the PV Provision returns for testClaim(node) with a class of
// that reclaim policy, the node's hostname label being hostname.
func wantPV(node, hostname string, policy v1.PersistentVolumeReclaimPolicy, mountOptions []string) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-1"},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany},
			PersistentVolumeReclaimPolicy: policy,
			MountOptions:                  mountOptions,
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: PathPrefix + "/pvc-uid-1", Type: ptr.To(v1.HostPathDirectory)},
			},
		},
	}
	if node != "" {
		pv.Annotations = map[string]string{hostpathv1.AnnotationNode: node}
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{hostname}}},
		}}}}
	}
	return pv
}

func TestProvision(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	// A node lister fed directly, as the informer would.
	nodes := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Nodes()
	if err := nodes.Informer().GetIndexer().Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.LabelHostname: "host-1"}}}); err != nil {
		t.Fatal(err)
	}
	retain := v1.PersistentVolumeReclaimRetain
	for _, tc := range []struct {
		name  string
		node  string
		class *storagev1.StorageClass
		want  *v1.PersistentVolume
	}{
		{"pinned, hostname from the node", "n1", testClass(nil), wantPV("n1", "host-1", v1.PersistentVolumeReclaimDelete, []string{"ro"})},
		{"pinned, node unknown", "n9", testClass(&retain), wantPV("n9", "n9", v1.PersistentVolumeReclaimRetain, []string{"ro"})},
		{"not pinned", "", testClass(nil), wantPV("", "", v1.PersistentVolumeReclaimDelete, []string{"ro"})},
		{"no class", "n1", nil, wantPV("n1", "host-1", v1.PersistentVolumeReclaimDelete, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv, state, err := New(nodes.Lister()).Provision(ctx, controller.ProvisionOptions{PVName: "pvc-uid-1", PVC: testClaim(tc.node), StorageClass: tc.class})
			if err != nil || state != controller.ProvisioningFinished {
				t.Fatalf("Provision: %v, %v", state, err)
			}
			if !reflect.DeepEqual(pv, tc.want) {
				t.Errorf("Provision returned\n%+v\nwant\n%+v", pv, tc.want)
			}
		})
	}
	if _, state, err := New(nil).Provision(ctx, controller.ProvisionOptions{PVName: "pvc-x"}); err == nil || state != controller.ProvisioningFinished {
		t.Errorf("Provision without a claim: %v, %v; want a final error", state, err)
	}
	if err := New(nil).Delete(ctx, wantPV("n1", "n1", v1.PersistentVolumeReclaimDelete, nil)); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

// TestRun runs the library's controller as Options.run wires it on a fake
// clientset: a claim of the class gets its PV object, with the library's
// finalizer by default (the fair floor) and without it with
// --finalizer=false (the old floor).
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		finalizers []string
	}{
		{"fair floor, the default", nil, []string{LibraryFinalizer}},
		{"old floor", []string{"--" + FlagFinalizer + "=false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			kube := fake.NewClientset(testClass(nil), testClaim("n1"),
				&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.LabelHostname: "host-1"}}})
			o := NewOptions()
			fs := pflag.NewFlagSet("noopprovisioner", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--kube-api-qps=5", "--kube-api-burst=10", "--workers=2",
				"--metrics-address=127.0.0.1:0"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- o.run(ctx, kube) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
			}()

			var pv *v1.PersistentVolume
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				got, err := kube.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-1", metav1.GetOptions{})
				pv = got
				return err == nil, nil
			})
			if err != nil {
				t.Fatalf("no PV for the claim: %v", err)
			}
			want := wantPV("n1", "host-1", v1.PersistentVolumeReclaimDelete, []string{"ro"}).Spec
			if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != "uid-1" || pv.Spec.StorageClassName != "hostpath-bench-noop" {
				t.Errorf("PV claim reference %+v, class %q", pv.Spec.ClaimRef, pv.Spec.StorageClassName)
			}
			pv.Spec.ClaimRef, pv.Spec.StorageClassName = nil, ""
			if !reflect.DeepEqual(pv.Spec, want) || pv.Annotations[hostpathv1.AnnotationNode] != "n1" {
				t.Errorf("PV %+v\nwant spec %+v", pv, want)
			}
			if !reflect.DeepEqual(pv.Finalizers, tc.finalizers) {
				t.Errorf("PV finalizers %q, want %q", pv.Finalizers, tc.finalizers)
			}
		})
	}
}

// TestFinalizerFlag: --finalizer is on by default, can be turned off and
// back on, and its help says what it does.
func TestFinalizerFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--finalizer=false"}, false},
		{[]string{"--finalizer=true"}, true},
		{[]string{"--finalizer"}, true},
		{[]string{"--finalizer=false", "--finalizer=true"}, true},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("noopprovisioner", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.Finalizer != tc.want {
			t.Errorf("%q: Finalizer = %v, want %v", tc.args, o.Finalizer, tc.want)
		}
	}
	fs := pflag.NewFlagSet("noopprovisioner", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	usage := fs.Lookup(FlagFinalizer).Usage
	for _, want := range []string{LibraryFinalizer, "KEP-2644", "--finalizer=false"} {
		if !strings.Contains(usage, want) {
			t.Errorf("--%s help %q lacks %q", FlagFinalizer, usage, want)
		}
	}
}

func TestValidate(t *testing.T) {
	valid := func() *Options {
		o := NewOptions()
		o.KubeAPIQPS, o.KubeAPIBurst, o.Workers = 100, 200, 16
		return o
	}
	if err := valid().Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	for _, tc := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.KubeAPIQPS = 0 }, "--kube-api-qps is required"},
		{func(o *Options) { o.KubeAPIBurst = 0 }, "--kube-api-burst is required"},
		{func(o *Options) { o.Workers = 0 }, "--workers is required"},
		{func(o *Options) { o.ProvisionerName = "" }, "--provisioner-name must not be empty"},
		{func(o *Options) { o.ResyncPeriod = 0 }, "--resync-period must be positive"},
		{func(o *Options) { o.MetricsAddress = "nowhere" }, "--metrics-address: "},
	} {
		o := valid()
		tc.change(o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want %q", err, tc.want)
		}
	}
	if d := NewOptions(); d.ProvisionerName != "hostpath.dev/noop-bench" || d.ResyncPeriod != controller.DefaultResyncPeriod || !d.Finalizer {
		t.Errorf("defaults %+v", d)
	}
}
