package capacity

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
)

func TestSync(t *testing.T) {
	small := func(name string, available int64) managerapi.Pool {
		p := pool(name, available)
		p.CapacityBytes = gi // threshold: MinThreshold, 16 MiB
		return p
	}
	broken := pool("broken", 9*gi)
	broken.Error = "statfs /var/broken: no such file or directory"
	plain := pool("plain", 5*gi)
	plain.Enforcement = ""
	staleHost := object(testNamespace, capacityClass("cap", "default"), newNode(selfNode, "old-host"), "old-host", gi)
	unlabelled := published("cap", 10*gi)
	delete(unlabelled.Labels, LabelStorageClass)
	unlabelled.MaximumVolumeSize = ptr.To(resource.MustParse("1Gi"))
	unlabelled.OwnerReferences[0].UID = "uid-of-an-older-node"
	handMade := published("cap", 10*gi)
	handMade.StorageClassName = "other"
	otherNodes := object(testNamespace, capacityClass("cap", "default"), newNode(otherNode, otherNode), otherNode, gi)

	tests := []struct {
		name string
		// node is selfNode's Node; noNode leaves it out.
		node        *v1.Node
		noNode      bool
		objs        []runtime.Object
		pools       []managerapi.Pool
		managerErr  error
		wantWrites  []string
		wantCalls   int
		wantErr     string
		wantDeleted []string
	}{{
		name: "one object per capacity-aware WaitForFirstConsumer class",
		objs: []runtime.Object{
			capacityClass("cap", "default"), capacityClass("cap-fast", "fast"),
			newClass("cap-immediate", hostpathv1.CapacityProvisionerName, storagev1.VolumeBindingImmediate, nil),
			newClass("hostpath", hostpathv1.DefaultProvisionerName, storagev1.VolumeBindingWaitForFirstConsumer, nil),
			newClass("theirs", "example.com/other", storagev1.VolumeBindingWaitForFirstConsumer, nil),
		},
		pools:      []managerapi.Pool{pool("default", 10*gi), pool("fast", 3*gi)},
		wantWrites: []string{"create cap 10Gi", "create cap-fast 3Gi"},
		wantCalls:  1,
	}, {
		name: "0 for a pool the manager lacks, cannot read, or that does not enforce sizes for enforceSize",
		objs: []runtime.Object{
			capacityClass("cap-broken", "broken"), capacityClass("cap-gone", "gone"), capacityClass("cap-plain", "plain"),
			newClass("cap-enforced", hostpathv1.CapacityProvisionerName, storagev1.VolumeBindingWaitForFirstConsumer,
				map[string]string{hostpathv1.ParamPool: "plain", hostpathv1.ParamEnforceSize: "true"}),
			newClass("cap-default", hostpathv1.CapacityProvisionerName, storagev1.VolumeBindingWaitForFirstConsumer, nil),
		},
		pools:      []managerapi.Pool{pool("default", 2*gi), broken, plain},
		wantWrites: []string{"create cap-broken 0", "create cap-default 2Gi", "create cap-enforced 0", "create cap-gone 0", "create cap-plain 5Gi"},
		wantCalls:  1,
	}, {
		name:      "a move within the threshold is not written",
		objs:      []runtime.Object{capacityClass("cap", "default"), published("cap", 10*gi)},
		pools:     []managerapi.Pool{pool("default", 11*gi)}, // 1 GiB: 1% of 100 GiB
		wantCalls: 1,
	}, {
		name:       "a move beyond the threshold is written",
		objs:       []runtime.Object{capacityClass("cap", "default"), published("cap", 10*gi)},
		pools:      []managerapi.Pool{pool("default", 11*gi+1)},
		wantWrites: []string{"update cap 11811160065"},
		wantCalls:  1,
	}, {
		name: "the threshold of a small pool is 16 MiB",
		objs: []runtime.Object{
			capacityClass("cap-a", "a"), published("cap-a", 100*mi),
			capacityClass("cap-b", "b"), published("cap-b", 100*mi),
		},
		pools:      []managerapi.Pool{small("a", 116*mi), small("b", 84*mi-1)},
		wantWrites: []string{"update cap-b 88080383"},
		wantCalls:  1,
	}, {
		name: "a move from or to 0 is always written",
		objs: []runtime.Object{
			capacityClass("cap-a", "a"), published("cap-a", 0),
			capacityClass("cap-b", "b"), published("cap-b", 5*mi),
		},
		pools:      []managerapi.Pool{small("a", mi), small("b", 0)},
		wantWrites: []string{"update cap-a 1Mi", "update cap-b 0"},
		wantCalls:  1,
	}, {
		name:        "the object of a class that went is deleted, without asking the manager",
		objs:        []runtime.Object{published("gone", gi), otherNodes},
		wantWrites:  []string{"delete " + ObjectName("gone", selfNode, selfHost)},
		wantDeleted: []string{ObjectName("gone", selfNode, selfHost)},
	}, {
		name: "the object of a class no longer capacity-aware is deleted",
		objs: []runtime.Object{
			newClass("cap", hostpathv1.DefaultProvisionerName, storagev1.VolumeBindingWaitForFirstConsumer, nil), published("cap", gi),
		},
		wantWrites:  []string{"delete " + ObjectName("cap", selfNode, selfHost)},
		wantDeleted: []string{ObjectName("cap", selfNode, selfHost)},
	}, {
		name:        "a changed hostname label: the old object goes, a new one comes",
		objs:        []runtime.Object{capacityClass("cap", "default"), staleHost},
		pools:       []managerapi.Pool{pool("default", gi)},
		wantWrites:  []string{"delete " + staleHost.Name, "create cap 1Gi"},
		wantCalls:   1,
		wantDeleted: []string{staleHost.Name},
	}, {
		name:       "labels, owner and maximumVolumeSize are repaired, with the capacity",
		objs:       []runtime.Object{capacityClass("cap", "default"), unlabelled},
		pools:      []managerapi.Pool{pool("default", 10*gi+mi)},
		wantWrites: []string{"update cap 10241Mi"},
		wantCalls:  1,
	}, {
		name:       "an object made by hand under the name with another class is made again",
		objs:       []runtime.Object{capacityClass("cap", "default"), handMade},
		pools:      []managerapi.Pool{pool("default", gi)},
		wantWrites: []string{"delete " + handMade.Name, "create cap 1Gi"},
		wantCalls:  1,
	}, {
		name:        "a Node without the hostname label gets no objects",
		node:        newNode(selfNode, ""),
		objs:        []runtime.Object{capacityClass("cap", "default"), published("cap", gi)},
		wantWrites:  []string{"delete " + ObjectName("cap", selfNode, selfHost)},
		wantDeleted: []string{ObjectName("cap", selfNode, selfHost)},
	}, {
		name:   "no Node: the garbage collector's job",
		noNode: true,
		objs:   []runtime.Object{capacityClass("cap", "default"), published("gone", gi)},
	}, {
		name:        "a failing manager: the deletions are done, nothing else is written",
		objs:        []runtime.Object{capacityClass("cap", "default"), published("cap", gi), published("gone", gi)},
		managerErr:  errors.New("connection refused"),
		wantWrites:  []string{"delete " + ObjectName("gone", selfNode, selfHost)},
		wantCalls:   1,
		wantErr:     `publish the storage capacity of node "node-a": ask the manager for its pools: connection refused`,
		wantDeleted: []string{ObjectName("gone", selfNode, selfHost)},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			objs := append([]runtime.Object{newNode(otherNode, otherNode)}, tc.objs...)
			if !tc.noNode {
				objs = append(objs, cmpOr(tc.node, newNode(selfNode, selfHost)))
			}
			mgr := newManager(tc.pools...)
			if tc.managerErr != nil {
				mgr.Fail(managertest.Failure{Method: managertest.Host, Err: tc.managerErr})
			}
			f := newFixture(t, mgr, testInterval, objs...)
			_, err := f.pub.sync(ctx)
			hostpathtest.CheckErr(t, err, tc.wantErr)
			if got := f.writes(t); !slices.Equal(got, tc.wantWrites) {
				t.Errorf("writes = %q, want %q", got, tc.wantWrites)
			}
			if len(mgr.Calls()) != tc.wantCalls {
				t.Errorf("manager calls = %d, want %d", len(mgr.Calls()), tc.wantCalls)
			}
			for _, name := range tc.wantDeleted {
				if f.stored(t, name) != nil {
					t.Errorf("CSIStorageCapacity %s still exists", name)
				}
			}
			if f.stored(t, otherNodes.Name) == nil && slices.Contains(tc.objs, runtime.Object(otherNodes)) {
				t.Errorf("the object of another node was deleted")
			}
		})
	}
}

// cmpOr returns n, or def when n is nil.
func cmpOr(n, def *v1.Node) *v1.Node {
	if n != nil {
		return n
	}
	return def
}

// TestPublishedObject checks every field of a published object, as the
// scheduler and the garbage collector read it, and the repair of one.
func TestPublishedObject(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager(pool("default", 10*gi))
	damaged := published("cap", 10*gi)
	damaged.Labels = map[string]string{LabelManagedBy: ManagedBy, LabelNode: selfNode, "team": "storage"}
	damaged.MaximumVolumeSize = ptr.To(resource.MustParse("1Ti"))
	f := newFixture(t, mgr, testInterval, newNode(selfNode, selfHost), capacityClass("cap", "default"), capacityClass("repaired", "default"))
	if _, err := f.pub.sync(ctx); err != nil {
		t.Fatal(err)
	}
	name := ObjectName("cap", selfNode, selfHost)
	got := f.stored(t, name)
	if got == nil {
		t.Fatalf("no CSIStorageCapacity %s", name)
	}
	wantLabels := map[string]string{LabelManagedBy: ManagedBy, LabelNode: selfNode, LabelStorageClass: "cap"}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: selfNode, UID: "uid-" + selfNode}}
	switch {
	case got.Namespace != testNamespace:
		t.Errorf("namespace %q, want %q", got.Namespace, testNamespace)
	case !maps.Equal(got.Labels, wantLabels):
		t.Errorf("labels %v, want %v", got.Labels, wantLabels)
	case !slices.Equal(got.OwnerReferences, wantOwner):
		t.Errorf("owner references %+v, want %+v", got.OwnerReferences, wantOwner)
	case got.StorageClassName != "cap":
		t.Errorf("storageClassName %q, want cap", got.StorageClassName)
	case got.NodeTopology == nil || len(got.NodeTopology.MatchExpressions) > 0 ||
		!maps.Equal(got.NodeTopology.MatchLabels, map[string]string{v1.LabelHostname: selfHost}):
		t.Errorf("nodeTopology %+v, want matchLabels %s=%s (the Node's label, not its name)", got.NodeTopology, v1.LabelHostname, selfHost)
	case got.Capacity == nil || got.Capacity.Value() != 10*gi:
		t.Errorf("capacity %v, want 10Gi", got.Capacity)
	case got.MaximumVolumeSize != nil:
		t.Errorf("maximumVolumeSize %v, want none", got.MaximumVolumeSize)
	}
	if !Selector(selfNode).Matches(labels.Set(got.Labels)) || Selector(otherNode).Matches(labels.Set(got.Labels)) {
		t.Errorf("labels %v: want selected by the Selector of %s only", got.Labels, selfNode)
	}

	// Someone damages the other object: it keeps their labels and gets
	// ours back, an interval after it was written.
	damaged.Name, damaged.StorageClassName = ObjectName("repaired", selfNode, selfHost), "repaired"
	if _, err := f.kube.StorageV1().CSIStorageCapacities(testNamespace).Update(ctx, damaged, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.syncCache(t)
	f.clock.Step(testInterval)
	if _, err := f.pub.sync(ctx); err != nil {
		t.Fatal(err)
	}
	repaired := f.stored(t, damaged.Name)
	if repaired.Labels["team"] != "storage" || repaired.Labels[LabelStorageClass] != "repaired" || repaired.MaximumVolumeSize != nil ||
		!slices.Equal(repaired.OwnerReferences, wantOwner) {
		t.Errorf("repaired object: labels %v, maximumVolumeSize %v, owners %+v", repaired.Labels, repaired.MaximumVolumeSize, repaired.OwnerReferences)
	}
}

// TestRateBound moves the capacity between refreshes on a fake clock: an
// object is written at most once per interval, a write held back is
// published when the interval is over (sync says when), and each object
// has its own bound.
func TestRateBound(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager(pool("default", 10*gi), pool("fast", 10*gi))
	f := newFixture(t, mgr, testInterval, newNode(selfNode, selfHost), capacityClass("cap", "default"), capacityClass("cap-fast", "fast"))
	steps := []struct {
		name      string
		after     time.Duration
		pools     []managerapi.Pool
		want      []string
		wantAgain time.Duration
	}{
		{name: "first refresh", want: []string{"create cap 10Gi", "create cap-fast 10Gi"}},
		{name: "a big move 10s later is held back", after: 10 * time.Second,
			pools: []managerapi.Pool{pool("default", 20*gi), pool("fast", 10*gi)}, wantAgain: 50 * time.Second},
		{name: "and again 49s later", after: 49 * time.Second, wantAgain: time.Second},
		{name: "written once the interval is over", after: time.Second, want: []string{"update cap 20Gi"}},
		{name: "the other object moves 30s later: its bound is its own", after: 30 * time.Second,
			pools: []managerapi.Pool{pool("default", 20*gi), pool("fast", 30*gi)}, want: []string{"update cap-fast 30Gi"}},
		{name: "both move: only the one written over an interval ago", after: 45 * time.Second,
			pools: []managerapi.Pool{pool("default", 40*gi), pool("fast", 50*gi)}, want: []string{"update cap 40Gi"}, wantAgain: 15 * time.Second},
		{name: "the other one when its interval is over", after: 15 * time.Second, want: []string{"update cap-fast 50Gi"}},
		{name: "quiet: nothing", after: time.Hour},
	}
	for _, s := range steps {
		f.clock.Step(s.after)
		if s.pools != nil {
			setPools(mgr, s.pools...)
		}
		again, err := f.pub.sync(ctx)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := f.writes(t); !slices.Equal(got, s.want) || again != s.wantAgain {
			t.Errorf("%s: writes %q, again %v; want %q, %v", s.name, got, again, s.want, s.wantAgain)
		}
		f.syncCache(t)
	}
}

func TestMoved(t *testing.T) {
	tests := []struct {
		published *resource.Quantity
		now       int64
		want      bool
	}{
		{nil, 0, true},
		{ptr.To(resource.MustParse("0")), 0, false},
		{ptr.To(resource.MustParse("0")), 1, true},
		{ptr.To(resource.MustParse("1")), 0, true},
		{ptr.To(resource.MustParse("1Gi")), gi + MinThreshold, false},
		{ptr.To(resource.MustParse("1Gi")), gi + MinThreshold + 1, true},
		{ptr.To(resource.MustParse("1Gi")), gi - MinThreshold, false},
		{ptr.To(resource.MustParse("1Gi")), gi - MinThreshold - 1, true},
	}
	for _, tc := range tests {
		if got := moved(tc.published, tc.now, MinThreshold); got != tc.want {
			t.Errorf("moved(%v, %d) = %v, want %v", tc.published, tc.now, got, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60)
	names := map[string]bool{}
	for _, in := range [][3]string{
		{"cap", "node-a", "node-a"}, {"cap", "node-a", "host-a"}, {"cap", "node-b", "node-a"}, {"cap2", "node-a", "node-a"},
		{long, long, long},
	} {
		name := ObjectName(in[0], in[1], in[2])
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 || !strings.HasPrefix(name, namePrefix) {
			t.Errorf("ObjectName%q = %q: %v", in, name, msgs)
		}
		if name != ObjectName(in[0], in[1], in[2]) {
			t.Errorf("ObjectName%q is not deterministic", in)
		}
		if names[name] {
			t.Errorf("ObjectName%q = %q, given before", in, name)
		}
		names[name] = true
	}
	for _, in := range []string{"node-a", strings.Repeat("n", 63), strings.Repeat("n", 64), long, long + "x"} {
		v := LabelValue(in)
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			t.Errorf("LabelValue(%d characters) = %q: %v", len(in), v, msgs)
		}
		if (len(in) <= 63) != (v == in) {
			t.Errorf("LabelValue(%d characters) = %q", len(in), v)
		}
	}
	if LabelValue(long) == LabelValue(long+"x") {
		t.Error("two long names give one label value")
	}
}

// capture is a SharedInformer that only records the handler registered.
type capture struct {
	cache.SharedInformer
	handler cache.ResourceEventHandler
}

func (c *capture) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.handler = h
	return nil, nil
}

// TestEventHandlers checks which events queue a refresh.
func TestEventHandlers(t *testing.T) {
	f := newFixture(t, newManager(), testInterval)
	notified := 0
	f.pub.notify = func() { notified++ }
	var classes, nodes, volumes, capacities capture
	if err := f.pub.AddEventHandlers(Sources{Classes: &classes, Nodes: &nodes, Volumes: &volumes, Capacities: &capacities}); err != nil {
		t.Fatal(err)
	}
	relabelled := newNode(selfNode, "new-host")
	recreated := newNode(selfNode, selfHost)
	recreated.UID = "uid-new"
	otherLabels := newNode(selfNode, selfHost)
	otherLabels.Labels["zone"] = "z1"
	pv := func(by, node, mode, size string) *v1.PersistentVolume {
		return &v1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: map[string]string{
				storagehelpers.AnnDynamicallyProvisioned: by, hostpathv1.AnnotationNode: node, hostpathv1.AnnotationMode: mode}},
			Spec: v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
		}
	}
	ours := pv(hostpathv1.DefaultProvisionerName, selfNode, hostpathv1.ModeNode, "1Gi")
	tests := []struct {
		name  string
		event func()
		want  bool
	}{
		{"a capacity-aware class comes", func() { classes.handler.OnAdd(capacityClass("cap", "default"), false) }, true},
		{"a capacity-aware class goes", func() {
			classes.handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "cap", Obj: capacityClass("cap", "default")})
		}, true},
		{"a capacity-aware class's labels change", func() {
			classes.handler.OnUpdate(capacityClass("cap", "default"), capacityClass("cap", "default"))
		}, false},
		{"a class of the other name comes", func() {
			classes.handler.OnAdd(newClass("hp", hostpathv1.DefaultProvisionerName, storagev1.VolumeBindingWaitForFirstConsumer, nil), false)
		}, false},
		{"this node comes", func() { nodes.handler.OnAdd(newNode(selfNode, selfHost), false) }, true},
		{"another node comes", func() { nodes.handler.OnAdd(newNode(otherNode, otherNode), false) }, false},
		{"this node's hostname label changes", func() { nodes.handler.OnUpdate(newNode(selfNode, selfHost), relabelled) }, true},
		{"this node is made again", func() { nodes.handler.OnUpdate(newNode(selfNode, selfHost), recreated) }, true},
		{"this node's other labels change", func() { nodes.handler.OnUpdate(newNode(selfNode, selfHost), otherLabels) }, false},
		{"a PV of this node comes", func() { volumes.handler.OnAdd(ours, false) }, true},
		{"a PV of the capacity-aware name of this node goes", func() {
			volumes.handler.OnDelete(pv(hostpathv1.CapacityProvisionerName, selfNode, "", "1Gi"))
		}, true},
		{"a multihost PV comes", func() {
			volumes.handler.OnAdd(pv(hostpathv1.CapacityProvisionerName, "", hostpathv1.ModeMultihost, "1Gi"), false)
		}, true},
		{"a PV of this node grows", func() { volumes.handler.OnUpdate(ours, pv(hostpathv1.DefaultProvisionerName, selfNode, "", "2Gi")) }, true},
		{"a PV of this node changes otherwise", func() { volumes.handler.OnUpdate(ours, ours) }, false},
		{"a PV of another node comes", func() { volumes.handler.OnAdd(pv(hostpathv1.DefaultProvisionerName, otherNode, "", "1Gi"), false) }, false},
		{"a PV of another provisioner comes", func() { volumes.handler.OnAdd(pv("example.com/other", selfNode, "", "1Gi"), false) }, false},
		{"an object of this node is deleted", func() { capacities.handler.OnDelete(published("cap", gi)) }, true},
		{"an object of this node is updated", func() { capacities.handler.OnUpdate(published("cap", gi), published("cap", 2*gi)) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			notified = 0
			tc.event()
			if got := notified > 0; got != tc.want {
				t.Errorf("refresh triggered: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRun drives Run on a fake clock: a refresh at start (create); after a
// Trigger, a refresh that holds the move back (the create was less than an
// interval ago); once the interval is over, the update; nothing after ctx
// is done. TestRateBound checks the timing itself, refresh by refresh.
//
// The clock moves only after the queue has been asked for the refresh it
// is to bring, and by at least 10 s: the delaying queue also wakes on a
// 10 s heartbeat of that clock, so a due refresh comes even when the queue
// set its timer while the clock moved.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mgr := newManager(pool("default", 10*gi))
	called := make(chan struct{}, 1)
	mgr.OnCall(func(managertest.Call) {
		select {
		case called <- struct{}{}:
		default:
		}
	})
	f := newFixture(t, mgr, testInterval, newNode(selfNode, selfHost), capacityClass("cap", "default"))
	// Each write reaches the cache, as through the informer.
	written := make(chan string, 10)
	f.kube.PrependReactor("*", "csistoragecapacities", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			obj := o.GetObject().(*storagev1.CSIStorageCapacity)
			if err := f.capacities.Update(obj.DeepCopy()); err != nil {
				t.Error(err)
			}
			written <- a.GetVerb() + " " + obj.Capacity.String()
		}
		return false, nil, nil
	})
	done := make(chan error)
	go func() { done <- f.pub.Run(ctx) }()

	<-called
	if got := <-written; got != "create 10Gi" {
		t.Errorf("first refresh wrote %q, want create 10Gi", got)
	}
	setPools(mgr, pool("default", 30*gi))
	f.pub.Trigger()
	f.clock.Step(10 * time.Second) // past TriggerDelay
	// The triggered refresh, which holds the update back. The refresh at
	// start had asked for the next one, an interval on, before it ended.
	<-called
	f.clock.Step(testInterval)
	if got := <-written; got != "update 30Gi" {
		t.Errorf("then wrote %q, want update 30Gi", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if len(written) != 0 {
		t.Errorf("%d more writes, want none", len(written))
	}
}

// TestRunIntervalZero checks that with publishing off, Run deletes this
// node's objects, and only those, and returns.
func TestRunIntervalZero(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mgr := newManager()
	other := object(testNamespace, capacityClass("cap", "default"), newNode(otherNode, otherNode), otherNode, gi)
	f := newFixture(t, mgr, 0, newNode(selfNode, selfHost), capacityClass("cap", "default"), published("cap", gi), published("old", gi), other)
	if err := f.pub.Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	got := f.writes(t)
	slices.Sort(got)
	want := []string{"delete " + ObjectName("cap", selfNode, selfHost), "delete " + ObjectName("old", selfNode, selfHost)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("writes = %q, want %q", got, want)
	}
	if f.stored(t, other.Name) == nil {
		t.Error("the object of another node was deleted")
	}
	if len(mgr.Calls()) != 0 {
		t.Errorf("manager calls = %q, want none", mgr.Calls())
	}
}
