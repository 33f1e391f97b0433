package provisioner

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// arrivingClasses is a StorageClass lister whose one class reaches the
// cache at the arrives-th Get (never when arrives is 0), as a class made
// just before its claim reaches the class informer after the claim
// informer.
type arrivingClasses struct {
	class   *storagev1.StorageClass
	arrives int
	gets    int
}

func (a *arrivingClasses) List(labels.Selector) ([]*storagev1.StorageClass, error) { return nil, nil }

func (a *arrivingClasses) Get(name string) (*storagev1.StorageClass, error) {
	a.gets++
	if name != a.class.Name || a.arrives == 0 || a.gets < a.arrives {
		return nil, apierrors.NewNotFound(storagev1.Resource("storageclasses"), name)
	}
	return a.class, nil
}

// TestClassOnItsWay: a claim whose storage-provisioner annotation names
// this provisioner is served even when its class reaches this instance's
// cache after the claim (before, it was left for the next resync, 15
// minutes); a claim that does not name it, or names another provisioner,
// does not wait; a class waited for in vain is not waited for again for a
// minute.
func TestClassOnItsWay(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Provisioner: testProvisioner}
	claim := func(provisioner string) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Annotations: map[string]string{}},
			Spec: v1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class.Name)}}
		if provisioner != "" {
			c.Annotations[storagehelpers.AnnStorageProvisioner] = provisioner
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		claim    *v1.PersistentVolumeClaim
		arrives  int
		served   bool
		wantGets int // 0: more than one
	}{
		{name: "in the cache", claim: claim(testProvisioner), arrives: 1, served: true, wantGets: 1},
		{name: "on its way", claim: claim(testProvisioner), arrives: 4, served: true},
		{name: "beta annotation", claim: func() *v1.PersistentVolumeClaim {
			c := claim("")
			c.Annotations[storagehelpers.AnnBetaStorageProvisioner] = testProvisioner
			return c
		}(), arrives: 3, served: true},
		{name: "not named by the claim", claim: claim(""), arrives: 3, wantGets: 1},
		{name: "another provisioner's", claim: claim("other.example/provisioner"), arrives: 3, wantGets: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			classes := &arrivingClasses{class: class, arrives: tc.arrives}
			p := New(Config{Names: testNames, Classes: classes, ClassWait: time.Minute})
			got := p.class(context.Background(), tc.claim)
			if (got != nil) != tc.served {
				t.Errorf("class = %v, want served %v", got, tc.served)
			}
			if tc.wantGets != 0 && classes.gets != tc.wantGets {
				t.Errorf("%d cache lookups, want %d", classes.gets, tc.wantGets)
			}
			if tc.wantGets == 0 && classes.gets <= 1 {
				t.Errorf("%d cache lookups, want it to have waited", classes.gets)
			}
		})
	}

	t.Run("never comes", func(t *testing.T) {
		classes := &arrivingClasses{class: class}
		clk := testingclock.NewFakePassiveClock(time.Now())
		p := New(Config{Names: testNames, Classes: classes, ClassWait: 50 * time.Millisecond, Clock: clk})
		if got := p.class(context.Background(), claim(testProvisioner)); got != nil || classes.gets <= 1 {
			t.Fatalf("class = %v after %d lookups, want nil after waiting", got, classes.gets)
		}
		classes.gets = 0
		clk.SetTime(clk.Now().Add(classMissMemory - time.Second))
		if got := p.class(context.Background(), claim(testProvisioner)); got != nil || classes.gets != 1 {
			t.Errorf("within a minute: class = %v after %d lookups, want nil after 1 (no wait)", got, classes.gets)
		}
		classes.gets = 0
		clk.SetTime(clk.Now().Add(2 * time.Second))
		if got := p.class(context.Background(), claim(testProvisioner)); got != nil || classes.gets <= 1 {
			t.Errorf("after a minute: class = %v after %d lookups, want nil after waiting again", got, classes.gets)
		}
	})
}
