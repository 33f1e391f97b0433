package cachetrim

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	shared "hostpath.dev/api/runtime/cachetrim"
	"hostpath.dev/api/runtime/cachetrim/cachetrimtest"
)

// foreignObjects is how many objects of another provisioner
// BenchmarkForeignCache caches: the real-cluster benchmark's count
// (scripts/bench-foreign.sh).
const foreignObjects = 10000

// foreignKinds are the objects of another provisioner that a provisioner
// instance caches: a claim bound to a CSI volume and its PV (testdata, as
// the API server sends them), and a claim still pending (as the
// real-cluster benchmark makes them, of a provisioner that never answers).
var foreignKinds = []struct {
	name    string
	example k8sruntime.Object
	// list returns n distinct objects, decoded from JSON.
	list func(b *testing.B, n int) k8sruntime.Object
}{
	{"claim-bound", &v1.PersistentVolumeClaim{}, func(b *testing.B, n int) k8sruntime.Object {
		return claimList(b, n, func(*v1.PersistentVolumeClaim) {})
	}},
	{"claim-pending", &v1.PersistentVolumeClaim{}, func(b *testing.B, n int) k8sruntime.Object {
		return claimList(b, n, func(c *v1.PersistentVolumeClaim) { pending(c) })
	}},
	{"pv", &v1.PersistentVolume{}, func(b *testing.B, n int) k8sruntime.Object { return volumeList(b, n, "pv.json") }},
	// hostpath's own, which every instance caches whole: a claim of
	// hostpath-immediate bound on the local cluster and its PV.
	{"hostpath-claim", &v1.PersistentVolumeClaim{}, func(b *testing.B, n int) k8sruntime.Object {
		return claimListOf(b, n, "hostpath-claim.json", func(*v1.PersistentVolumeClaim) {})
	}},
	{"hostpath-pv", &v1.PersistentVolume{}, func(b *testing.B, n int) k8sruntime.Object { return volumeList(b, n, "hostpath-pv.json") }},
}

// volumeList returns n distinct PVs decoded from the testdata file name.
func volumeList(b *testing.B, n int, name string) k8sruntime.Object {
	{
		data := hostpathtest.Testdata(b, name)
		list := &v1.PersistentVolumeList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: make([]v1.PersistentVolume, n)}
		for i := range list.Items {
			pv := &list.Items[i]
			hostpathtest.Decode(b, data, pv)
			pv.Name = fmt.Sprintf("pvc-%08x-8a4f-4c1e-9d2b-3f6a7c8d9e01", i)
			pv.UID = types.UID(fmt.Sprintf("%08x-6b2e-4e8f-a1c4-7d5e9b2f3a60", i))
			pv.Spec.ClaimRef.Name = fmt.Sprintf("data-%05d", i)
			pv.Spec.ClaimRef.UID = types.UID(fmt.Sprintf("%08x-8a4f-4c1e-9d2b-3f6a7c8d9e01", i))
		}
		return list
	}
}

// claimList returns n distinct claims decoded from testdata, changed by
// change.
func claimList(b *testing.B, n int, change func(*v1.PersistentVolumeClaim)) k8sruntime.Object {
	return claimListOf(b, n, "claim.json", change)
}

// claimListOf returns n distinct claims decoded from the testdata file
// name, changed by change.
func claimListOf(b *testing.B, n int, name string, change func(*v1.PersistentVolumeClaim)) k8sruntime.Object {
	data := hostpathtest.Testdata(b, name)
	list := &v1.PersistentVolumeClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: make([]v1.PersistentVolumeClaim, n)}
	for i := range list.Items {
		c := &list.Items[i]
		hostpathtest.Decode(b, data, c)
		c.Name = fmt.Sprintf("data-%05d", i)
		c.UID = types.UID(fmt.Sprintf("%08x-8a4f-4c1e-9d2b-3f6a7c8d9e01", i))
		c.Spec.VolumeName = "pvc-" + string(c.UID)
		change(c)
	}
	return list
}

// BenchmarkForeignCache reports what 1,000 objects of another provisioner
// cost a provisioner instance, cached whole (managedFields dropped, as the
// mechanism's Transform without rules leaves them), as stubs (New; PVs
// only, those that name a directory of a pool: claims are never stubs),
// and as the provisioner's informers hold them ("provisioner": passed
// through Keep, which caches none of them, then New), in one run: an
// informer lists foreignObjects decoded objects through the transform into
// a store with the indexes the provisioner's informers have (by namespace,
// for the listers; by UID on claims, the library's), and "heap-MiB/1000" is
// the growth of the live heap (after a GC) per 1,000 objects listed,
// "heap-B/object" per object. The loop times the transform of one decoded
// object. Each sub-benchmark logs the figures of its kind so far:
//
//	go test -run '^$' -bench BenchmarkForeignCache ./internal/app/cachetrim/
func BenchmarkForeignCache(b *testing.B) {
	names := hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName)
	trim := New(names)
	keep := NewKeep(names, "node-a", storagelisters.NewStorageClassLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), nil, nil)
	for _, kind := range foreignKinds {
		perObject := map[string]float64{}
		for _, mode := range []struct {
			name      string
			transform cache.TransformFunc
			filter    bool
		}{{"whole", shared.Transform(), false}, {"stub", trim, false}, {"provisioner", trim, true}} {
			if _, pv := kind.example.(*v1.PersistentVolume); mode.name == "stub" && !pv {
				continue // claims are never stubs
			}
			b.Run(kind.name+"/"+mode.name, func(b *testing.B) {
				list := kind.list
				if mode.filter {
					list = func(b *testing.B, n int) k8sruntime.Object { return keptOf(kind.list(b, n), keep) }
				}
				per := cachedHeapPerObject(b, list, kind.example, mode.transform)
				perObject[mode.name] = per
				one := kind.list(b, 1)
				items, _ := extract(one)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := mode.transform(items[0]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(per, "heap-B/object")
				b.ReportMetric(per*1000/(1<<20), "heap-MiB/1000")
				b.Logf("%s: bytes of live heap per object listed: %v", kind.name, perObject)
			})
		}
	}
}

// keptOf returns the items of list that keep accepts, as the provisioner's
// informers list them (filterList).
func keptOf(list k8sruntime.Object, keep *Keep) k8sruntime.Object {
	switch l := list.(type) {
	case *v1.PersistentVolumeClaimList:
		l.Items = filterList(newFilter(keep.Claim), metav1.ListOptions{}, l.Items)
	case *v1.PersistentVolumeList:
		l.Items = filterList(newFilter(keep.Volume), metav1.ListOptions{}, l.Items)
	}
	return list
}

// cachedHeapPerObject returns the live heap that one object takes once an
// informer has listed foreignObjects of them through transform: the growth
// of the heap after a GC, divided by foreignObjects (what list made of
// them may be fewer).
func cachedHeapPerObject(b *testing.B, list func(*testing.B, int) k8sruntime.Object, example k8sruntime.Object, transform cache.TransformFunc) float64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	lw := &onceListWatch{list: list(b, foreignObjects)}
	items, err := extract(lw.list)
	if err != nil {
		b.Fatal(err)
	}
	inf := cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if _, ok := example.(*v1.PersistentVolumeClaim); ok {
		// The provisioner library's index of claims by UID.
		if err := inf.AddIndexers(cache.Indexers{"uid": func(obj any) ([]string, error) {
			return []string{string(obj.(*v1.PersistentVolumeClaim).UID)}, nil
		}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := inf.SetTransform(transform); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	go inf.Run(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		b.Fatal("the informer did not sync")
	}
	if n := len(inf.GetStore().ListKeys()); n != len(items) {
		b.Fatalf("the informer holds %d objects, want %d", n, len(items))
	}
	lw.list, items = nil, nil
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(inf)
	close(stop)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / foreignObjects
}

// onceListWatch serves its list, not a copy (the informer's decoded
// objects, as from the API server), and a watch that sends nothing.
type onceListWatch struct{ list k8sruntime.Object }

func (l *onceListWatch) List(metav1.ListOptions) (k8sruntime.Object, error) { return l.list, nil }
func (l *onceListWatch) Watch(metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (*onceListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// extract returns the items of a list, as pointers into it.
func extract(list k8sruntime.Object) ([]any, error) {
	switch l := list.(type) {
	case *v1.PersistentVolumeClaimList:
		out := make([]any, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	case *v1.PersistentVolumeList:
		out := make([]any, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	}
	return nil, fmt.Errorf("not a list: %T", list)
}

// BenchmarkPerNodeCache reports what a Node, a Pod and a HostDefinition
// cost an instance: every instance caches every HostDefinition (one per
// node and pool) and the pods of every instance and manager, the part of
// its memory that grows with the number of nodes, and its own Node (and
// for a while those it looks up: package nodes). For a worker
// Node with 30 images, a manager pod and a Ready HostDefinition (testdata,
// as the API server sends them) it reports the live heap of one object (after a GC,
// over 500 decoded copies) kept whole but for managedFields
// ("heap-B/whole"), trimmed by the rules the host definer uses
// (shared.NodeStatus, shared.PodContainers; the provisioner used them until
// 2026-11-27; they leave a HostDefinition whole: "heap-B/trimmed"), and as
// the provisioner caches it now (New: nodeStub, podstub.From, definitionStub;
// "heap-B/stub"). The loop times New on one decoded
// object:
//
//	go test -run '^$' -bench BenchmarkPerNodeCache ./internal/app/cachetrim/
func BenchmarkPerNodeCache(b *testing.B) {
	stub := New(hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName))
	for _, tc := range []struct {
		name, file string
		newObj     func() any
	}{
		{"node", "node.json", func() any { return &v1.Node{} }},
		{"pod", "pod.json", func() any { return &v1.Pod{} }},
		{"hostdefinition", "hostdefinition.json", func() any { return &hostpathv1.HostDefinition{} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			data := hostpathtest.Testdata(b, tc.file)
			metrics := map[string]float64{}
			for unit, transform := range map[string]cache.TransformFunc{
				"heap-B/whole":   shared.Transform(),
				"heap-B/trimmed": shared.Transform(shared.NodeStatus, shared.PodContainers),
				"heap-B/stub":    stub,
			} {
				metrics[unit] = cachedHeap(b, data, tc.newObj, transform)
			}
			b.ReportAllocs()
			for b.Loop() {
				obj := tc.newObj()
				hostpathtest.Decode(b, data, obj)
				if _, err := stub(obj); err != nil {
					b.Fatal(err)
				}
			}
			for unit, v := range metrics {
				b.ReportMetric(v, unit)
			}
		})
	}
}

// cachedHeap is the live heap one object decoded from data and passed
// through transform takes, over 500 copies.
func cachedHeap(b *testing.B, data []byte, newObj func() any, transform cache.TransformFunc) float64 {
	return cachetrimtest.HeapPerObject(500, func() any {
		obj := newObj()
		hostpathtest.Decode(b, data, obj)
		trimmed, err := transform(obj)
		if err != nil {
			b.Fatal(err)
		}
		return trimmed
	})
}
