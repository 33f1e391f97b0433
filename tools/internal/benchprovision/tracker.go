package benchprovision

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// tracker records when the watches first saw each claim's PV, each claim
// Bound, each PV Released and each PV deleted.
type tracker struct {
	mu     sync.Mutex
	ns     string
	now    func() time.Time
	pvSeen map[types.UID]time.Time // claim UID -> first PV for it
	pvs    map[types.UID]*corev1.PersistentVolume
	bound  map[types.UID]time.Time // claim UID -> first seen Bound
	pvGone map[string]time.Time    // PV name -> deletion seen
	// released: PV name -> first seen Released (or under deletion, or
	// deleted, whichever came first): kube-controller-manager's part of a
	// deletion ends there, the provisioner's begins.
	released map[string]time.Time
}

func newTracker(ns string, now func() time.Time) *tracker {
	return &tracker{
		ns: ns, now: now,
		pvSeen:   map[types.UID]time.Time{},
		pvs:      map[types.UID]*corev1.PersistentVolume{},
		bound:    map[types.UID]time.Time{},
		pvGone:   map[string]time.Time{},
		released: map[string]time.Time{},
	}
}

// watch starts informers on the PVs and on the claims of the tracker's
// namespace that feed the tracker, and waits until they are synced (at most
// timeout). The returned function stops them; call it also after an error.
func (t *tracker) watch(ctx context.Context, client kubernetes.Interface, timeout time.Duration) (stop func(), err error) {
	ictx, cancel := context.WithCancel(ctx)
	pvFactory := informers.NewSharedInformerFactory(client, 0)
	pvcFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(t.ns))
	stop = func() {
		cancel() // before Shutdown, which waits for the informers to stop
		pvFactory.Shutdown()
		pvcFactory.Shutdown()
	}
	if _, err := pvFactory.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.onPV,
		UpdateFunc: func(_, obj any) { t.onPV(obj) },
		DeleteFunc: t.onPVDelete,
	}); err != nil {
		return stop, err
	}
	if _, err := pvcFactory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.onClaim,
		UpdateFunc: func(_, obj any) { t.onClaim(obj) },
	}); err != nil {
		return stop, err
	}
	sctx, cancelSync := context.WithTimeout(ictx, timeout)
	defer cancelSync()
	for _, f := range []informers.SharedInformerFactory{pvFactory, pvcFactory} {
		f.Start(ictx.Done())
	}
	for _, f := range []informers.SharedInformerFactory{pvFactory, pvcFactory} {
		for typ, ok := range f.WaitForCacheSync(sctx.Done()) {
			if !ok {
				return stop, fmt.Errorf("%v informer did not sync", typ)
			}
		}
	}
	return stop, nil
}

func (t *tracker) ours(pv *corev1.PersistentVolume) bool {
	return pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == t.ns && pv.Spec.ClaimRef.UID != ""
}

func (t *tracker) onPV(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || !t.ours(pv) {
		return
	}
	uid, now := pv.Spec.ClaimRef.UID, t.now()
	t.locked(func() {
		firstSeen(t.pvSeen, uid, now)
		t.pvs[uid] = pv
		if pv.Status.Phase == corev1.VolumeReleased || pv.DeletionTimestamp != nil {
			firstSeen(t.released, pv.Name, now)
		}
	})
}

func (t *tracker) onPVDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pv, ok := obj.(*corev1.PersistentVolume); ok && t.ours(pv) {
		now := t.now()
		t.locked(func() { firstSeen(t.pvGone, pv.Name, now); firstSeen(t.released, pv.Name, now) })
	}
}

func (t *tracker) onClaim(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Namespace == t.ns && pvc.Status.Phase == corev1.ClaimBound {
		now := t.now()
		t.locked(func() { firstSeen(t.bound, pvc.UID, now) })
	}
}

// firstSeen sets m[key] to now unless it is set already.
func firstSeen[K comparable](m map[K]time.Time, key K, now time.Time) {
	if _, seen := m[key]; !seen {
		m[key] = now
	}
}

// waitFor returns once cond (called with t.mu held) is true, checking it
// every poll interval; it fails after timeout or when ctx ends, with the
// state cond last reported.
func (t *tracker) waitFor(ctx context.Context, timeout, poll time.Duration, what string, cond func() (bool, string)) error {
	var state string
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(context.Context) (bool, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		var ok bool
		ok, state = cond()
		return ok, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("waiting for %s (%s): %w", what, state, ctx.Err())
	default:
		return fmt.Errorf("timed out after %v waiting for %s (%s)", timeout, what, state)
	}
}

// locked runs f with t.mu held.
func (t *tracker) locked(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f()
}
