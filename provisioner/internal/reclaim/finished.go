package reclaim

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// finishedTTL is how long a PV's reclaim by the library's path is
// remembered: longer than the library's DELETE and the informer lag that
// bring the PV back to the Controller under load, short enough that a
// memory never outlives the few moments it is meant for.
const finishedTTL = 5 * time.Minute

// finishedMax bounds the memory. Past it nothing more is remembered until
// entries expire (expired ones are dropped every finishedTTL/4, on the
// next add): forgetting is always safe, the PV then goes through the full
// path (one more fan-out, whose managers answer that the directory is
// gone).
const finishedMax = 10000

// finishedEntry is what is remembered of one PV.
type finishedEntry struct {
	// at is when the directory reached its final state.
	at time.Time
	// loc is where the PV said its directory lives then.
	loc location
}

// finishedSet remembers, by PV UID, the PVs of reclaim policy Delete
// whose directory this process took to its final state in the library's
// path (Controller.Reclaim), for finishedTTL. The Controller's pass on
// such a PV, once the library's DELETE has put it under deletion, then
// removes the finalizer without a second fan-out to the managers.
//
// A PV is taken as remembered only while its UID (never reused), reclaim
// policy (still Delete) and location (pool, directory, node, listed nodes)
// are those it had: a PV that changed in any of them, or that this
// process did not reclaim (a restart, another instance), goes through the
// full path. It lives in memory only; nothing is written. It is not
// apimachinery's cache.Expiring (which the provisioner used before for a
// memory of deleted PVs): that one has no bound on its size.
type finishedSet struct {
	mu      sync.Mutex
	clock   clock.PassiveClock
	entries map[types.UID]finishedEntry
	// pruned is when expired entries were last dropped.
	pruned time.Time
}

// newFinishedSet returns an empty set timed by clk.
func newFinishedSet(clk clock.PassiveClock) *finishedSet {
	return &finishedSet{clock: clk, entries: map[types.UID]finishedEntry{}}
}

// add remembers that pv's directory, at loc, reached its final state now.
// Only a PV of reclaim policy Delete is remembered.
func (s *finishedSet) add(pv *v1.PersistentVolume, loc location) {
	if pv.UID == "" || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if now.Sub(s.pruned) >= finishedTTL/4 {
		for uid, e := range s.entries {
			if now.Sub(e.at) >= finishedTTL {
				delete(s.entries, uid)
			}
		}
		s.pruned = now
	}
	if _, ok := s.entries[pv.UID]; !ok && len(s.entries) >= finishedMax {
		return
	}
	s.entries[pv.UID] = finishedEntry{at: now, loc: loc}
}

// has reports whether pv, whose directory is at loc, is remembered: added
// less than finishedTTL ago under the same UID and location, and its
// reclaim policy is still Delete.
func (s *finishedSet) has(pv *v1.PersistentVolume, loc location) bool {
	if pv.UID == "" || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[pv.UID]
	return ok && s.clock.Now().Sub(e.at) < finishedTTL && e.loc.equal(loc)
}

// equal reports whether l and o name the same directory on the same nodes.
func (l location) equal(o location) bool {
	return l.Pool == o.Pool && l.Directory == o.Directory && l.Multihost == o.Multihost && l.Node == o.Node &&
		slices.Equal(l.Nodes, o.Nodes) && slices.Equal(l.PendingNodes, o.PendingNodes)
}
