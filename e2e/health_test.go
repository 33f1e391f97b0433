package e2e

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Volume health events (README, "Volume health").
const (
	eventUsageHigh        = "VolumeUsageHigh"
	eventDirectoryMissing = "VolumeDirectoryMissing"
	eventHealthy          = "VolumeHealthy"
)

// TestVolumeHealthDirectoryRemoved: a Bound volume's directory removed by
// hand on its node gets one Warning VolumeDirectoryMissing event on its
// claim, naming the node, from that node's provisioner (the e2e install
// refreshes every 5s); putting the directory back gets VolumeHealthy; the
// claim's deletion then removes it as usual.
func TestVolumeHealthDirectoryRemoved(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pvc := e.claim(ctx, t, "removed", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	dir := e.nodePath(t, node, pv)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, eventDirectoryMissing, node)

	if err := os.Mkdir(dir, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeNormal, eventHealthy, node)
	if n := e.countEvents(ctx, t, pvc.Name, eventDirectoryMissing); n != 1 {
		t.Errorf("%d %s events on claim %s, want 1 (one per change of condition)", n, eventDirectoryMissing, pvc.Name)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}

// countEvents is how many times reason was recorded on claim (an event
// repeated is one object with a count).
func (e *provEnv) countEvents(ctx context.Context, t *testing.T, claim, reason string) int32 {
	t.Helper()
	events, err := e.events(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, ev := range events {
		if ev.Reason == reason {
			n += max(ev.Count, 1)
		}
	}
	return n
}
