package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework"
)

const (
	// classCapacity is the capacity-aware example class (manifests/).
	classCapacity = "hostpath-capacity"
	// classBtrfsCapacity is the capacity-aware btrfs class
	// (manifests/components/btrfs).
	classBtrfsCapacity = "hostpath-btrfs-capacity"
	// The labels of the publisher's CSIStorageCapacity objects
	// (provisioner/internal/capacity).
	labelCapacityClass = "hostpath.dev/storage-class"
	labelCapacityNode  = "hostpath.dev/node"
	// eventRescheduling is the provisioner's event when the node the
	// scheduler chose cannot hold the volume.
	eventRescheduling = "Rescheduling"
)

// capacityOf waits until node publishes a CSIStorageCapacity for class whose
// capacity satisfies ok, and returns it.
func (e *provEnv) capacityOf(ctx context.Context, t *testing.T, class, node, what string, ok func(int64) bool) int64 {
	t.Helper()
	var got int64 = -1
	framework.WaitFor(ctx, t, provisionTimeout, fmt.Sprintf("the CSIStorageCapacity of class %s on %s to be %s", class, node, what), func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.StorageV1().CSIStorageCapacities(framework.SystemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: labelCapacityClass + "=" + class + "," + labelCapacityNode + "=" + node,
		})
		if err != nil {
			return false, err
		}
		if len(list.Items) != 1 {
			return false, fmt.Errorf("%d objects", len(list.Items))
		}
		c := list.Items[0]
		if c.Capacity == nil {
			return false, fmt.Errorf("%s has no capacity", c.Name)
		}
		got = c.Capacity.Value()
		if c.NodeTopology == nil || c.NodeTopology.MatchLabels[corev1.LabelHostname] == "" {
			return false, fmt.Errorf("%s has no hostname topology: %+v", c.Name, c.NodeTopology)
		}
		if !ok(got) {
			return false, fmt.Errorf("capacity %s", resource.NewQuantity(got, resource.BinarySI))
		}
		return true, nil
	})
	return got
}

// scheduledPod is writerPod placed by the scheduler (on node, through a
// node selector, when node is not ""), so that the scheduler checks the
// claim's volume: its capacity, its PV's node affinity.
func scheduledPod(ns, name, node, claim, command string) *corev1.Pod {
	p := writerPod(ns, name, "", claim, command)
	if node != "" {
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	return p
}

// TestCapacityAwareScheduling: with the capacity-aware btrfs class, each
// real node publishes its pool's room as a CSIStorageCapacity, which
// follows a volume's creation and deletion; a claim that fits only one
// node's pool lands there at once (no rescheduling); a claim bigger than
// every pool leaves its pod Pending with the scheduler's "did not have
// enough free storage", and the provisioner is never asked.
func TestCapacityAwareScheduling(t *testing.T) {
	ctx := t.Context()
	// The pool first, so that it goes last: the test namespace's volumes
	// must be deleted while it is still there.
	quotaPool(ctx, t, framework.Cluster(), poolBtrfs)
	e := setupProvisioner(ctx, t)
	if _, err := e.f.Client.StorageV1().StorageClasses().Get(ctx, classBtrfsCapacity, metav1.GetOptions{}); err != nil {
		t.Fatalf("StorageClass %s: %v", classBtrfsCapacity, err)
	}
	full, other := e.nodes[0], e.nodes[1]
	const (
		mi        = int64(1) << 20
		threshold = 16 * mi // the publisher's smallest change worth a write
	)
	room := map[string]int64{}
	for _, n := range e.nodes {
		room[n] = e.capacityOf(ctx, t, classBtrfsCapacity, n, "over 700Mi", func(c int64) bool { return c > 700*mi })
	}

	// A volume of 400Mi on one node: its published room follows.
	taken := e.claim(ctx, t, "taken", classBtrfsCapacity, "400Mi", corev1.ReadWriteOnce, nil)
	takenPod := scheduledPod(e.ns, "taken", full, taken.Name, "sleep 3600")
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, takenPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, takenPV := e.waitBound(ctx, t, taken.Name)
	// The pool's room is min(free space, capacity × overcommit − promised):
	// it shrinks by what the 400Mi promise takes beyond the free space.
	after := e.capacityOf(ctx, t, classBtrfsCapacity, full, "smaller after the volume", func(c int64) bool { return c < room[full]-threshold })
	t.Logf("Room on %s: %d MiB before the 400Mi volume, %d MiB after; on %s: %d MiB", full, room[full]/mi, after/mi, other, room[other]/mi)

	// A claim that fits only the other node's pool lands there at once.
	big := fmt.Sprintf("%dMi", (after+threshold)/mi+32)
	if (after+threshold)/mi+32 >= room[other]/mi {
		t.Fatalf("no size fits %s (%d MiB) but not %s (%d MiB)", other, room[other]/mi, full, after/mi)
	}
	fits := e.claim(ctx, t, "fits-one", classBtrfsCapacity, big, corev1.ReadWriteOnce, nil)
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, scheduledPod(e.ns, "fits-one", "", fits.Name, "sleep 3600"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fitsPVC, _ := e.waitBound(ctx, t, fits.Name)
	if got := fitsPVC.Annotations[annSelectedNode]; got != other {
		t.Errorf("claim %s of %s was placed on %q, want %s, the only node with room", fits.Name, big, got, other)
	}
	for _, reason := range []string{eventProvisioningFail, eventRescheduling} {
		if n := e.countEvents(ctx, t, fits.Name, reason); n != 0 {
			t.Errorf("claim %s got %d %s events, want none", fits.Name, n, reason)
		}
	}

	// A claim bigger than every pool: the scheduler keeps its pod Pending.
	huge := e.claim(ctx, t, "too-big", classBtrfsCapacity, "4Gi", corev1.ReadWriteOnce, nil)
	hugePod := scheduledPod(e.ns, "too-big", "", huge.Name, "sleep 3600")
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, hugePod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(ctx, t, provisionTimeout, "a FailedScheduling event saying the pools have no room", func(ctx context.Context) (bool, error) {
		events, err := e.f.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + hugePod.Name})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, ev := range events.Items {
			if ev.Reason == "FailedScheduling" && strings.Contains(ev.Message, "did not have enough free storage") {
				return true, nil
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, fmt.Errorf("the pod's events so far: %q", seen)
	})
	got, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, huge.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimPending || got.Annotations[annSelectedNode] != "" {
		t.Errorf("claim %s: phase %s, selected node %q; want Pending with no node", huge.Name, got.Status.Phase, got.Annotations[annSelectedNode])
	}
	for _, reason := range []string{eventProvisioningFail, eventRescheduling} {
		if n := e.countEvents(ctx, t, huge.Name, reason); n != 0 {
			t.Errorf("claim %s got %d %s events, want none: the provisioner was asked", huge.Name, n, reason)
		}
	}

	// Deleting the 400Mi volume gives its room back.
	e.deleteAndWaitGone(ctx, t, takenPod.Name, taken.Name)
	e.waitGoneEverywhere(ctx, t, takenPV)
	e.capacityOf(ctx, t, classBtrfsCapacity, full, "back to what it was", func(c int64) bool { return c >= room[full]-threshold })
	e.deleteAndWaitGone(ctx, t, hugePod.Name, huge.Name)
	_, fitsPV := e.waitBound(ctx, t, fits.Name)
	e.deleteAndWaitGone(ctx, t, "fits-one", fits.Name)
	e.waitGoneEverywhere(ctx, t, fitsPV)
}

// TestCapacityFollowsClasses: a new capacity-aware class (provisioner
// hostpath.dev, WaitForFirstConsumer) gets one CSIStorageCapacity per real
// node, owned by its Node (so the garbage collector removes it with the
// node); deleting the class removes them.
func TestCapacityFollowsClasses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	binding := storagev1.VolumeBindingWaitForFirstConsumer
	class := e.createStorageClass(ctx, t, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "e2e-capacity-" + framework.RandomSuffix()},
		Provisioner:       hostpathv1.CapacityProvisionerName,
		VolumeBindingMode: &binding,
	})
	for _, n := range e.nodes {
		e.capacityOf(ctx, t, class, n, "published", func(int64) bool { return true })
		list, err := e.f.Client.StorageV1().CSIStorageCapacities(framework.SystemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: labelCapacityClass + "=" + class + "," + labelCapacityNode + "=" + n,
		})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("CSIStorageCapacity of %s on %s: %v, %v", class, n, list, err)
		}
		owners := list.Items[0].OwnerReferences
		if len(owners) != 1 || owners[0].Kind != "Node" || owners[0].Name != n {
			t.Errorf("CSIStorageCapacity %s is owned by %+v, want Node %s", list.Items[0].Name, owners, n)
		}
	}
	if err := e.f.Client.StorageV1().StorageClasses().Delete(ctx, class, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitNoCapacity(ctx, t, labelCapacityClass+"="+class)
}

// waitNoCapacity waits until no CSIStorageCapacity matches the label
// selector.
func (e *provEnv) waitNoCapacity(ctx context.Context, t *testing.T, selector string) {
	t.Helper()
	framework.WaitFor(ctx, t, provisionTimeout, "no CSIStorageCapacity of "+selector, func(ctx context.Context) (bool, error) {
		list, err := e.f.Client.StorageV1().CSIStorageCapacities(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		if len(list.Items) > 0 {
			return false, fmt.Errorf("%d left, the first %s", len(list.Items), list.Items[0].Name)
		}
		return true, nil
	})
}
