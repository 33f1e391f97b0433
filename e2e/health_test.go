package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"hostpath.dev/e2e/framework"
)

// Volume health events (docs/volumes.md, "Volume health").
const (
	eventUsageHigh        = "VolumeUsageHigh"
	eventDirectoryMissing = "VolumeDirectoryMissing"
	eventHealthy          = "VolumeHealthy"
	eventPoolReadOnly     = "PoolReadOnly"
	eventPoolMissing      = "PoolMissing"
)

// TestVolumeHealthDirectoryRemoved: a Bound volume's directory removed by
// hand on its node gets one Warning VolumeDirectoryMissing event on its
// claim, naming the node, from that node's provisioner (the e2e install
// refreshes every 5s); putting the directory back gets VolumeHealthy; the
// claim's deletion then removes it as usual.
func TestVolumeHealthDirectoryRemoved(t *testing.T) {
	t.Parallel()
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

// TestVolumeHealthPool: the pool of a Bound volume remounted read-only (as
// after a disk error) gets one Warning PoolReadOnly event on the claim,
// naming the node; read-write again, VolumeHealthy. The pool's disk
// unplugged (unmounted, its directory gone) gets one Warning PoolMissing;
// plugged back with its data, VolumeHealthy again, and the claim's
// deletion removes the directory as usual. scripts/quota-pool.sh does the
// remounts and the unplugging, on the btrfs pool.
func TestVolumeHealthPool(t *testing.T) {
	ctx := t.Context()
	quotaPool(ctx, t, framework.Cluster(), poolBtrfs)
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pool := func(cmd string) {
		t.Helper()
		if out, err := runScript(ctx, e.f, "quota-pool.sh", cmd, "--fs", poolBtrfs, node); err != nil {
			t.Fatalf("scripts/quota-pool.sh %s --fs %s %s: %v\n%s", cmd, poolBtrfs, node, err, out)
		}
	}
	t.Cleanup(func() {
		// Whatever failed: the pool back, read-write, before quotaPool's
		// cleanup removes it.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, cmd := range []string{"up", "rw"} {
			if out, err := runScript(cctx, e.f, "quota-pool.sh", cmd, "--fs", poolBtrfs, node); err != nil {
				t.Errorf("scripts/quota-pool.sh %s: %v\n%s", cmd, err, out)
			}
		}
	})
	class := e.storageClass(ctx, t, "btrfs-now", storagev1.VolumeBindingImmediate, map[string]string{"pool": poolBtrfs, "enforceSize": "true"})
	pvc := e.claim(ctx, t, "pool-health", class, "8Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv := e.waitBound(ctx, t, pvc.Name)
	if err := os.WriteFile(e.nodePath(t, node, pv, "f"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	pool("ro")
	e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, eventPoolReadOnly, node)
	pool("rw")
	e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeNormal, eventHealthy, node)

	pool("unplug")
	e.waitEvent(ctx, t, pvc.Name, corev1.EventTypeWarning, eventPoolMissing, node)
	pool("up")
	framework.WaitFor(ctx, t, provisionTimeout, "a second VolumeHealthy event on claim "+pvc.Name, func(ctx context.Context) (bool, error) {
		return e.countEvents(ctx, t, pvc.Name, eventHealthy) >= 2, nil
	})
	for _, reason := range []string{eventPoolReadOnly, eventPoolMissing} {
		if n := e.countEvents(ctx, t, pvc.Name, reason); n != 1 {
			t.Errorf("%d %s events on claim %s, want 1 (one per change of condition)", n, reason, pvc.Name)
		}
	}
	if data, err := os.ReadFile(e.nodePath(t, node, pv, "f")); err != nil || string(data) != "kept\n" {
		t.Errorf("The volume's file after the pool came back: %q, %v", data, err)
	}
	e.deleteAndWaitGone(ctx, t, "", pvc.Name)
	e.waitGoneEverywhere(ctx, t, pv)
}
