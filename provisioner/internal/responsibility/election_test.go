package responsibility

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"hostpath.dev/provisioner/internal/podstub"
)

func TestWinner(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	if got := Winner("k", nil); got != "" {
		t.Errorf("Winner with no candidates = %q, want empty", got)
	}
	counts := map[string]int{}
	moved := 0
	for i := range 4000 {
		key := fmt.Sprintf("uid-%d", i)
		winner := Winner(key, nodes)
		counts[winner]++
		// The order of candidates does not matter.
		reversed := slices.Clone(nodes)
		slices.Reverse(reversed)
		if got := Winner(key, reversed); got != winner {
			t.Fatalf("Winner(%q) = %q for reversed candidates, %q before", key, got, winner)
		}
		// Removing an instance moves only the keys it won.
		without := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == "n2" })
		after := Winner(key, without)
		if winner != "n2" && after != winner {
			t.Fatalf("Winner(%q) moved from %q to %q when n2 left", key, winner, after)
		}
		if winner == "n2" {
			moved++
		}
	}
	for _, n := range nodes {
		if counts[n] < 800 || counts[n] > 1200 {
			t.Errorf("node %s wins %d of 4000 keys, want about 1000: %v", n, counts[n], counts)
		}
	}
	if moved != counts["n2"] {
		t.Errorf("moved %d keys, want %d", moved, counts["n2"])
	}
}

func pod(name, node string, ready bool, deleting bool) *v1.Pod {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "p"}},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: status}}},
	}
	if deleting {
		now := metav1.NewTime(time.Unix(0, 0))
		p.DeletionTimestamp = &now
	}
	return p
}

// podCache is a cache of pods as an instance keeps them (podstub.Pods,
// indexed by namespace as an informer's are).
func podCache(t testing.TB, pods ...*v1.Pod) podstub.Lister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		if err := indexer.Add(podstub.From(p)); err != nil {
			t.Fatal(err)
		}
	}
	return podstub.NewLister(indexer, "ns")
}

// TestPodInstances: the instances are the pods of the instances' cache
// in their namespace (the API server sends it only the pods of the
// instance selector), by node: Live those Ready and not terminating,
// OnNode those not terminating.
func TestPodInstances(t *testing.T) {
	other := pod("other", "n9", true, false)
	other.Namespace = "ns2"
	pods := podCache(t,
		pod("a", "n1", true, false),
		pod("b", "n2", false, false), // not ready yet
		pod("c", "n3", true, true),   // terminating
		pod("d", "n4", true, false),
		other,
	)

	// The calling instance counts even before its pod is Ready.
	inst := NewPodInstances(pods, "n2")
	live, err := inst.Live()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"n1", "n2", "n4"}; !slices.Equal(live, want) {
		t.Errorf("Live = %v, want %v", live, want)
	}
	for node, want := range map[string]bool{"n1": true, "n2": true, "n3": false, "n4": true, "n9": false, "n5": false} {
		if got, _ := inst.OnNode(node); got != want {
			t.Errorf("OnNode(%s) = %v, want %v", node, got, want)
		}
	}
	// Every Ready instance elects the same instance: exactly one says yes.
	for i := range 50 {
		key := fmt.Sprintf("uid-%d", i)
		electedCount := 0
		for _, self := range []string{"n1", "n4"} {
			ok, err := NewPodInstances(pods, self).Elected(key)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				electedCount++
			}
		}
		if electedCount != 1 {
			t.Errorf("key %s elects %d instances, want 1", key, electedCount)
		}
	}
}
