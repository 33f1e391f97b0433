package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

// pvOf is a PV in phase, being deleted when deleting.
func pvOf(name string, phase corev1.PersistentVolumePhase, deleting bool) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PersistentVolumeStatus{Phase: phase}}
	if deleting {
		now := metav1.Now()
		pv.DeletionTimestamp = &now
		pv.Finalizers = []string{"kubernetes.io/pv-protection"}
	}
	return pv
}

// newOwners is an Owners of a fake clientset holding objs, with a fake
// clock, and a function that counts the GETs of PVs the clientset saw.
func newOwners(t *testing.T, objs ...runtime.Object) (*Owners, *fake.Clientset, *testingclock.FakeClock, func() int) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	clk := testingclock.NewFakeClock(time.Now())
	o := NewOwners(cs.CoreV1().PersistentVolumes(), func(ns string) ClaimGetter { return cs.CoreV1().PersistentVolumeClaims(ns) }, cs.StorageV1().StorageClasses(), OwnersOptions{Clock: clk})
	gets := func() int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "persistentvolumes" {
				n++
			}
		}
		return n
	}
	return o, cs, clk, gets
}

// TestOwnersPersistentVolume: only a PV found Bound, and not being
// deleted, is answered from memory (for BoundTTL, and never to a fresh
// lookup); every other answer, the ones that may allow a remote
// destructive call, is read from the API server every time.
func TestOwnersPersistentVolume(t *testing.T) {
	for _, tc := range []struct {
		desc string
		pv   *corev1.PersistentVolume // nil: none
		// wantGets is the GETs of two lookups in a row (the second one
		// fresh when fresh), then of a third one after BoundTTL.
		fresh    bool
		wantGets []int
	}{
		{desc: "Bound: remembered until BoundTTL", pv: pvOf("pv-1", corev1.VolumeBound, false), wantGets: []int{1, 1, 2}},
		{desc: "Bound, asked fresh", pv: pvOf("pv-1", corev1.VolumeBound, false), fresh: true, wantGets: []int{1, 2, 3}},
		{desc: "Bound and being deleted: never remembered", pv: pvOf("pv-1", corev1.VolumeBound, true), wantGets: []int{1, 2, 3}},
		{desc: "Released: never remembered", pv: pvOf("pv-1", corev1.VolumeReleased, false), wantGets: []int{1, 2, 3}},
		{desc: "Failed: never remembered", pv: pvOf("pv-1", corev1.VolumeFailed, false), wantGets: []int{1, 2, 3}},
		{desc: "Available: never remembered", pv: pvOf("pv-1", corev1.VolumeAvailable, false), wantGets: []int{1, 2, 3}},
		{desc: "gone: never remembered", wantGets: []int{1, 2, 3}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var objs []runtime.Object
			if tc.pv != nil {
				objs = append(objs, tc.pv)
			}
			o, _, clk, gets := newOwners(t, objs...)
			for i, fresh := range []bool{false, tc.fresh, false} {
				if i == 2 {
					clk.Step(DefaultBoundTTL + time.Second)
				}
				pv, err := o.PersistentVolume(ctx, "pv-1", fresh)
				if err != nil {
					t.Fatal(err)
				}
				if (pv == nil) != (tc.pv == nil) || (pv != nil && pv.Status.Phase != tc.pv.Status.Phase) {
					t.Errorf("lookup %d = %+v, want %+v", i, pv, tc.pv)
				}
				if got := gets(); got != tc.wantGets[i] {
					t.Errorf("after lookup %d: %d GETs, want %d", i, got, tc.wantGets[i])
				}
			}
		})
	}
}

// TestOwnersForgetsBound: a remembered Bound PV is forgotten as soon as a
// fresh lookup finds it Released, so the next lookup reads it again.
func TestOwnersForgetsBound(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o, cs, _, gets := newOwners(t, pvOf("pv-1", corev1.VolumeBound, false))
	if _, err := o.PersistentVolume(ctx, "pv-1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pvOf("pv-1", corev1.VolumeReleased, false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if pv, err := o.PersistentVolume(ctx, "pv-1", true); err != nil || pv.Status.Phase != corev1.VolumeReleased {
		t.Fatalf("fresh lookup = %+v, %v; want Released", pv, err)
	}
	if pv, err := o.PersistentVolume(ctx, "pv-1", false); err != nil || pv.Status.Phase != corev1.VolumeReleased || gets() != 3 {
		t.Errorf("lookup = %+v, %v after %d GETs; want Released, read again (3 GETs)", pv, err, gets())
	}
}

// TestOwnersClaim: a claim is read every time; a missing one is nil.
func TestOwnersClaim(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: types.UID("1")}}
	o, cs, _, _ := newOwners(t, claim)
	for range 2 {
		got, err := o.Claim(ctx, "ns", "data")
		if err != nil || got == nil || got.UID != "1" {
			t.Fatalf("Claim = %+v, %v", got, err)
		}
	}
	if got, err := o.Claim(ctx, "other", "data"); err != nil || got != nil {
		t.Errorf("Claim of another namespace = %+v, %v; want none", got, err)
	}
	if n := len(cs.Actions()); n != 3 {
		t.Errorf("%d API calls, want 3", n)
	}
}

// TestOwnersStorageClass: a class is read every time; a missing one is
// nil.
func TestOwnersStorageClass(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Provisioner: "hostpath.dev/provisioner", Parameters: map[string]string{"mode": "multihost"}}
	o, cs, _, _ := newOwners(t, class)
	for range 2 {
		if got, err := o.StorageClass(ctx, "shared"); err != nil || got == nil || got.Parameters["mode"] != "multihost" {
			t.Fatalf("StorageClass = %+v, %v", got, err)
		}
	}
	if got, err := o.StorageClass(ctx, "other"); err != nil || got != nil {
		t.Errorf("StorageClass of another name = %+v, %v; want none", got, err)
	}
	if n := len(cs.Actions()); n != 3 {
		t.Errorf("%d API calls, want 3", n)
	}
}

// TestOwnersErrors: an API error other than NotFound is an error naming
// the object, never taken for "gone".
func TestOwnersErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o, cs, _, _ := newOwners(t)
	cs.PrependReactor("get", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("persistentvolumes"), "pv-1", errors.New("no get"))
	})
	if pv, err := o.PersistentVolume(ctx, "pv-1", false); err == nil || pv != nil || !strings.Contains(err.Error(), `get PersistentVolume "pv-1"`) {
		t.Errorf("PersistentVolume = %+v, %v; want the error", pv, err)
	}
	if c, err := o.Claim(ctx, "ns", "data"); err == nil || c != nil || !strings.Contains(err.Error(), "get PersistentVolumeClaim ns/data") {
		t.Errorf("Claim = %+v, %v; want the error", c, err)
	}
	if c, err := o.StorageClass(ctx, "shared"); err == nil || c != nil || !strings.Contains(err.Error(), `get StorageClass "shared"`) {
		t.Errorf("StorageClass = %+v, %v; want the error", c, err)
	}
}

// blockingPVs blocks every Get until release is closed, counting those
// in flight.
type blockingPVs struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingPVs) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.PersistentVolume, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumes"), name)
}

// TestOwnersConcurrency: at most MaxInFlight lookups run at once; one
// more waits for a slot, and gives up when its context ends.
func TestOwnersConcurrency(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	b := &blockingPVs{entered: make(chan struct{}, 3), release: make(chan struct{})}
	o := NewOwners(b, nil, nil, OwnersOptions{MaxInFlight: 2})
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := o.PersistentVolume(ctx, "pv", false)
			done <- err
		}()
	}
	<-b.entered
	<-b.entered
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := o.PersistentVolume(cctx, "pv", false); err == nil || !strings.Contains(err.Error(), "owner lookups in flight") {
		t.Errorf("third lookup = %v; want it to give up waiting for a slot", err)
	}
	if len(b.entered) != 0 {
		t.Error("a third lookup reached the API server")
	}
	close(b.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("lookup = %v", err)
		}
	}
}
