package cachetrim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller/metrics"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// yesProvisioner is a provisioner whose Qualifier and DeletionGuard say
// yes to everything: only the library's own checks can skip an object. It
// records what it is asked to provision and delete, and ignores it.
type yesProvisioner struct {
	mu                    sync.Mutex
	provisioned, deleted  []string
	guarded               []string
	provisionCh, deleteCh chan string
}

var (
	_ controller.Provisioner   = &yesProvisioner{}
	_ controller.Qualifier     = &yesProvisioner{}
	_ controller.DeletionGuard = &yesProvisioner{}
)

func (p *yesProvisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	p.mu.Lock()
	p.provisioned = append(p.provisioned, o.PVC.Name)
	p.mu.Unlock()
	p.provisionCh <- o.PVC.Name
	return nil, controller.ProvisioningFinished, &controller.IgnoredError{Reason: "test"}
}

func (p *yesProvisioner) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	p.mu.Lock()
	p.deleted = append(p.deleted, pv.Name)
	p.mu.Unlock()
	p.deleteCh <- pv.Name
	return &controller.IgnoredError{Reason: "test"}
}

func (p *yesProvisioner) ShouldProvision(context.Context, *v1.PersistentVolumeClaim) bool {
	return true
}

// ShouldDelete records the PVs the library asks about: those it takes for
// its own (isProvisionerForVolume).
func (p *yesProvisioner) ShouldDelete(_ context.Context, pv *v1.PersistentVolume) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.guarded = append(p.guarded, pv.Name)
	return true
}

// TestLibrarySkipsStubs runs the provisioner library over the informers
// the provisioner makes (Register, over a fake clientset), which hold
// none of another provisioner's claims and PVs but the PVs that name a
// directory of a pool, as stubs, in the worst case: the claims' class is
// ours (it was recreated for hostpath, say), and the Qualifier and the
// DeletionGuard say yes to everything. The library must provision none,
// delete none, count no failure and write no claim or PV. A claim and a
// PV of ours show when the library has looked at every object: one worker
// takes the queues in order.
func TestLibrarySkipsStubs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	names := hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName)
	transform := New(names)

	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath"}, Provisioner: hostpathv1.DefaultProvisionerName,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
	var claims []v1.PersistentVolumeClaim
	var pvs []v1.PersistentVolume
	for i := range 20 {
		c := claimWith(t)
		c.Name, c.UID = fmt.Sprintf("foreign-%02d", i), types.UID(fmt.Sprintf("u-foreign-%02d", i))
		c.Spec.StorageClassName = ptr.To(class.Name)
		if i%2 == 0 {
			// Pending, node selected: what the library would provision.
			pending(c)
		}
		claims = append(claims, *c)
		pv := volumeWith(t)
		pv.Name = fmt.Sprintf("pv-foreign-%02d", i)
		// Released with policy Delete: what the library would delete.
		pv.Status.Phase, pv.Spec.PersistentVolumeReclaimPolicy = v1.VolumeReleased, v1.PersistentVolumeReclaimDelete
		if i%2 == 0 {
			// Made by hand, pointing into a pool of this node.
			pv.Annotations = map[string]string{hostpathv1.AnnotationNode: "node-a", hostpathv1.AnnotationPool: "default", hostpathv1.AnnotationDirectory: pv.Name}
			pv.Spec.CSI = nil
			pv.Spec.HostPath = &v1.HostPathVolumeSource{Path: "/var/hpvolumes/" + pv.Name}
		}
		pvs = append(pvs, *pv)
	}
	ours := pending(claimWith(t, storagehelpers.AnnStorageProvisioner+"="+class.Provisioner, storagehelpers.AnnBetaStorageProvisioner+"="+class.Provisioner,
		storagehelpers.AnnSelectedNode))
	ours.Name, ours.UID, ours.Spec.StorageClassName = "ours", "u-ours", ptr.To(class.Name)
	claims = append(claims, *ours)
	ourPV := volumeWith(t, storagehelpers.AnnDynamicallyProvisioned+"="+class.Provisioner)
	ourPV.Name, ourPV.Spec.CSI, ourPV.Finalizers = "pv-ours", nil, []string{hostpathv1.FinalizerDirectoryProtection}
	ourPV.Spec.HostPath = &v1.HostPathVolumeSource{Path: "/var/hpvolumes/d"}
	ourPV.Status.Phase, ourPV.Spec.PersistentVolumeReclaimPolicy = v1.VolumeReleased, v1.PersistentVolumeReclaimDelete
	pvs = append(pvs, *ourPV)

	objects := []runtime.Object{class}
	for i := range claims {
		objects = append(objects, &claims[i])
	}
	for i := range pvs {
		objects = append(objects, &pvs[i])
	}
	kube := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(transform))
	Register(factory, Scope{Names: names, Node: "node-a"})
	claimInformer := factory.Core().V1().PersistentVolumeClaims().Informer()
	volumeInformer := factory.Core().V1().PersistentVolumes().Informer()
	classes := factory.Storage().V1().StorageClasses()
	prov := &yesProvisioner{provisionCh: make(chan string, len(claims)), deleteCh: make(chan string, len(pvs))}
	m := metrics.New("test")
	ctrl := controller.NewProvisionController(ctx, kube, hostpathv1.DefaultProvisionerName, prov,
		controller.AdditionalProvisionerNames(names.Additional()),
		controller.LeaderElection(false),
		controller.Threadiness(1),
		controller.ClaimsInformer(claimInformer),
		controller.VolumesInformer(volumeInformer),
		controller.ClassesInformer(classes.Informer()),
		controller.MetricsInstance(m),
	)
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx)
	}()

	// The first claim and the first PV the library acts on are ours.
	for _, w := range []struct {
		what string
		ch   chan string
		want string
	}{{"provisioned", prov.provisionCh, ours.Name}, {"deleted", prov.deleteCh, ourPV.Name}} {
		select {
		case got := <-w.ch:
			if got != w.want {
				t.Errorf("the library %s %q first, want only %q", w.what, got, w.want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the library %s nothing within a minute, want %q", w.what, w.want)
		}
	}
	cancel()
	<-done

	prov.mu.Lock()
	defer prov.mu.Unlock()
	if !slices.Equal(prov.provisioned, []string{ours.Name}) || !slices.Equal(prov.deleted, []string{ourPV.Name}) {
		t.Errorf("provisioned %q and deleted %q, want only ours", prov.provisioned, prov.deleted)
	}
	if !slices.Equal(prov.guarded, []string{ourPV.Name}) {
		t.Errorf("the library took %q for its own PVs (asked the DeletionGuard), want only %q", prov.guarded, ourPV.Name)
	}
	// Our claim's provisioning counts as failed (Provision ignored it),
	// under its class: no other series, no other count.
	if n, ours := testutil.CollectAndCount(m.PersistentVolumeClaimProvisionFailedTotal),
		testutil.ToFloat64(m.PersistentVolumeClaimProvisionFailedTotal.WithLabelValues(class.Name, "")); n != 1 || ours != 1 {
		t.Errorf("the library counted failures to provision in %d series, %v for our claim; want 1, 1", n, ours)
	}
	if n := testutil.CollectAndCount(m.PersistentVolumeDeleteFailedTotal); n != 0 {
		t.Errorf("the library counted failures to delete in %d series, want none", n)
	}
	for _, a := range kube.Actions() {
		switch r := a.GetResource().Resource; {
		case r != "persistentvolumeclaims" && r != "persistentvolumes", a.GetVerb() == "list", a.GetVerb() == "watch":
		default:
			t.Errorf("the library called the API server: %s %s", a.GetVerb(), r)
		}
	}
	// The caches the library read held our claim and PV whole, the PVs
	// that name a directory as stubs, and nothing else.
	var cachedClaims, cachedPVs []string
	for _, obj := range claimInformer.GetStore().List() {
		cachedClaims = append(cachedClaims, obj.(*v1.PersistentVolumeClaim).Name)
	}
	if !slices.Equal(cachedClaims, []string{ours.Name}) {
		t.Errorf("cached claims %q, want only %q", cachedClaims, ours.Name)
	}
	for _, obj := range volumeInformer.GetStore().List() {
		pv := obj.(*v1.PersistentVolume)
		cachedPVs = append(cachedPVs, pv.Name)
		if pv.Name != ourPV.Name && pv.Status.Phase != "" {
			t.Errorf("PV %s is cached whole, want a stub", pv.Name)
		}
	}
	slices.Sort(cachedPVs)
	var wantPVs []string
	for i := 0; i < 20; i += 2 {
		wantPVs = append(wantPVs, fmt.Sprintf("pv-foreign-%02d", i))
	}
	if wantPVs = append(wantPVs, ourPV.Name); !slices.Equal(cachedPVs, wantPVs) {
		t.Errorf("cached PVs %q, want %q (ours and those naming a directory)", cachedPVs, wantPVs)
	}
}
