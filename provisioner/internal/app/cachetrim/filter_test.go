package cachetrim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/provisioner/internal/responsibility"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// keepWith returns the Keep of the configured names on node-a with a
// StorageClass cache and a PV cache that hold objects, and an instance on
// each Node of objects.
func keepWith(t *testing.T, objects ...any) *Keep {
	t.Helper()
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	volumes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var running responsibilitytest.Instances
	for _, obj := range objects {
		indexer := classes
		switch obj := obj.(type) {
		case *v1.PersistentVolume:
			indexer = volumes
		case *v1.Node:
			running.On = append(running.On, obj.Name)
			continue
		}
		if err := indexer.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	return NewKeep(configured, "node-a", storagelisters.NewStorageClassLister(classes), corelisters.NewPersistentVolumeLister(volumes), running)
}

// hostpathPV is a PV of the configured name named name, in mode node on
// node (multihost when node is "").
func hostpathPV(name, node string) *v1.PersistentVolume {
	if node == "" {
		return hostpathtest.MultihostPV(name, nil, hostpathtest.ProvisionedBy(configured.Name()), hostpathtest.InDirectory(name))
	}
	return hostpathtest.NodePV(name, node, hostpathtest.ProvisionedBy(configured.Name()), hostpathtest.InDirectory(name))
}

// bound makes c bound to the PV volume.
func bound(c *v1.PersistentVolumeClaim, volume string) *v1.PersistentVolumeClaim {
	c.Spec.VolumeName = volume
	c.Status.Phase = v1.ClaimBound
	return c
}

// multihostClass is a multihost class of the configured name.
func multihostClass(name string) *storagev1.StorageClass {
	c := hostpathtest.Class(name, configured.Name())
	c.Parameters = map[string]string{hostpathv1.ParamMode: hostpathv1.ModeMultihost}
	return c
}

// claimOfClass is a pending claim of class (nil: none set) with the
// storage-provisioner annotations keyValues (as claimWith).
func claimOfClass(t *testing.T, class *string, keyValues ...string) *v1.PersistentVolumeClaim {
	c := pending(claimWith(t, append([]string{storagehelpers.AnnStorageProvisioner, storagehelpers.AnnBetaStorageProvisioner, storagehelpers.AnnSelectedNode}, keyValues...)...))
	c.Spec.StorageClassName = class
	return c
}

func TestKeep(t *testing.T) {
	keep := keepWith(t, hostpathtest.Class("hostpath", hostpathv1.DefaultProvisionerName), hostpathtest.Class("mine", configured.Name()),
		hostpathtest.Class("gp3", other), multihostClass("shared"), hostpathPV("pv-here", "node-a"), hostpathPV("pv-there", "node-b"), hostpathPV("pv-shared", ""),
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})
	boundPV := func(name, node string, change func(*v1.PersistentVolume)) *v1.PersistentVolume {
		pv := hostpathPV(name, node)
		pv.Status.Phase = v1.VolumeBound
		change(pv)
		return pv
	}
	same := func(*v1.PersistentVolume) {}
	ann := storagehelpers.AnnStorageProvisioner
	for _, tc := range []struct {
		desc  string
		claim *v1.PersistentVolumeClaim
		want  bool
	}{
		{"annotated with another provisioner, class ours", claimOfClass(t, ptr.To("hostpath"), ann+"="+other), false},
		{"annotated with another provisioner by the beta annotation alone", claimOfClass(t, ptr.To("hostpath"), storagehelpers.AnnBetaStorageProvisioner+"="+other), false},
		{"annotated with hostpath's default name, class another's", claimOfClass(t, ptr.To("gp3"), ann+"="+hostpathv1.DefaultProvisionerName), true},
		{"annotated with the configured name", claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name()), true},
		{"annotated with the capacity-aware name", claimOfClass(t, nil, ann+"="+hostpathv1.CapacityProvisionerName), true},
		{"not annotated, class hostpath's", claimOfClass(t, ptr.To("hostpath")), true},
		{"not annotated, class of the configured name", claimOfClass(t, ptr.To("mine")), true},
		{"not annotated, class another's (WaitForFirstConsumer, not scheduled)", claimOfClass(t, ptr.To("gp3")), false},
		{"not annotated, class does not exist yet", claimOfClass(t, ptr.To("later")), true},
		{"not annotated, class \"\" (binds to PVs made by hand)", claimOfClass(t, ptr.To("")), false},
		{"not annotated, no class (a default class comes with an update)", claimOfClass(t, nil), false},
		{"empty annotation, class hostpath's", claimOfClass(t, ptr.To("hostpath"), ann+"="), true},
		{"bound to a node-mode PV of this node", bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name()), "pv-here"), true},
		{"bound to a node-mode PV of another node", bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name()), "pv-there"), false},
		{"bound to a multihost PV", bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name()), "pv-shared"), true},
		{"bound to a PV not in the cache, no node annotation", bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name()), "pv-unknown"), true},
		{"bound to a PV not in the cache, selected on another node",
			bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name(), storagehelpers.AnnSelectedNode+"=node-b"), "pv-unknown"), false},
		{"bound to a PV not in the cache, selected on this node",
			bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name(), storagehelpers.AnnSelectedNode+"=node-a"), "pv-unknown"), true},
		{"bound to a PV not in the cache, pinned to this node, selected on another",
			bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name(), hostpathv1.AnnotationProvisionOnNode+"=node-a",
				storagehelpers.AnnSelectedNode+"=node-b"), "pv-unknown"), true},
		{"bound to a PV not in the cache, pinned by kubevirt's key to another node",
			bound(claimOfClass(t, ptr.To("mine"), ann+"="+configured.Name(), hostpathv1.AnnotationKubevirtProvisionOnNode+"=node-b"), "pv-unknown"), false},
		{"bound to a PV not in the cache, multihost class, selected on another node",
			bound(claimOfClass(t, ptr.To("shared"), ann+"="+configured.Name(), storagehelpers.AnnSelectedNode+"=node-b"), "pv-unknown"), true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := keep.Claim(tc.claim); got != tc.want {
				t.Errorf("Keep.Claim = %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		desc string
		pv   *v1.PersistentVolume
		want bool
	}{
		{"another provisioner's", volumeWith(t), false},
		{"another provisioner's naming a directory", volumeWith(t, hostpathv1.AnnotationDirectory+"=d"), true},
		{"another provisioner's naming a pool", volumeWith(t, hostpathv1.AnnotationPool+"=default"), true},
		{"another provisioner's naming a node", volumeWith(t, hostpathv1.AnnotationNode+"=node-a"), true},
		{"hostpath's", volumeWith(t, storagehelpers.AnnDynamicallyProvisioned+"="+hostpathv1.DefaultProvisionerName), true},
		{"the configured name's", volumeWith(t, storagehelpers.AnnDynamicallyProvisioned+"="+configured.Name()), true},
		{"migrated to hostpath", volumeWith(t, storagehelpers.AnnMigratedTo+"="+hostpathv1.CapacityProvisionerName), true},
		{"made by hand, no annotation", volumeWith(t, storagehelpers.AnnDynamicallyProvisioned), false},
		{"hostpath's, node mode, Bound, this node", boundPV("a", "node-a", same), true},
		{"hostpath's, node mode, Bound, another node", boundPV("b", "node-b", same), false},
		{"hostpath's, node mode, Bound, a node that runs no instance (gone)", boundPV("c", "node-c", same), true},
		{"hostpath's, node mode, Released, another node", boundPV("b", "node-b", func(pv *v1.PersistentVolume) { pv.Status.Phase = v1.VolumeReleased }), true},
		{"hostpath's, node mode, Bound, another node, marked gone", boundPV("b", "node-b", func(pv *v1.PersistentVolume) {
			pv.Annotations[hostpathv1.AnnotationNodeGoneSince] = "2026-11-27T00:00:00Z"
		}), true},
		{"hostpath's, node mode, Bound, another node, under deletion", boundPV("b", "node-b", func(pv *v1.PersistentVolume) {
			pv.DeletionTimestamp = &metav1.Time{}
		}), true},
		{"hostpath's, multihost, Bound", boundPV("m", "", same), true},
		{"hostpath's default name, node mode, Bound, another node (instance configured otherwise)", boundPV("d", "node-b", func(pv *v1.PersistentVolume) {
			pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] = hostpathv1.DefaultProvisionerName
		}), true},
	} {
		t.Run("PV "+tc.desc, func(t *testing.T) {
			if got := keep.Volume(tc.pv); got != tc.want {
				t.Errorf("Keep.Volume = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClaimInformer runs the informers of Register over a fake clientset
// and changes claims under them: a claim of another provisioner is never
// cached, one that comes to be hostpath's is cached at that update, one
// that comes to be another's, or bound to a PV of another node, leaves the
// cache at that update, and the
// handlers see an add and a delete for them, nothing for the others.
func TestClaimInformer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	named := func(name string, c *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
		c.Name, c.UID, c.ResourceVersion = name, "", ""
		return c
	}
	ann := storagehelpers.AnnStorageProvisioner
	namespace := claimWith(t).Namespace
	kube := fake.NewClientset(hostpathtest.Class("hostpath", hostpathv1.DefaultProvisionerName), hostpathtest.Class("gp3", other),
		named("foreign", claimOfClass(t, ptr.To("gp3"), ann+"="+other)),
		named("ours", claimOfClass(t, ptr.To("hostpath"))),
		named("turns-foreign", claimOfClass(t, ptr.To("later"))),
		named("turns-ours", claimOfClass(t, nil)),
		named("binds-elsewhere", claimOfClass(t, ptr.To("hostpath"))),
		hostpathPV("pv-there", "node-b"),
	)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(New(configured)))
	Register(factory, Scope{Names: configured, Node: "node-a"})
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()
	events := make(chan string, 100)
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + obj.(*v1.PersistentVolumeClaim).Name },
		UpdateFunc: func(_, obj any) { events <- "update " + obj.(*v1.PersistentVolumeClaim).Name },
		DeleteFunc: func(obj any) { events <- "delete " + obj.(*v1.PersistentVolumeClaim).Name },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), claims.HasSynced) {
		t.Fatal("the claim cache did not sync")
	}
	cached := func() []string {
		var names []string
		for _, obj := range claims.GetStore().List() {
			names = append(names, obj.(*v1.PersistentVolumeClaim).Name)
		}
		slices.Sort(names)
		return names
	}
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			select {
			case got := <-events:
				if got != w {
					t.Fatalf("handler saw %q, want %q", got, w)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("handler saw nothing within 30s, want %q", w)
			}
		}
	}
	expect("add binds-elsewhere", "add ours", "add turns-foreign")
	if got := cached(); !slices.Equal(got, []string{"binds-elsewhere", "ours", "turns-foreign"}) {
		t.Fatalf("cached %q after the list, want binds-elsewhere, ours and turns-foreign (class unknown)", got)
	}

	update := func(c *v1.PersistentVolumeClaim) {
		t.Helper()
		if _, err := kube.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *v1.PersistentVolumeClaim {
		t.Helper()
		c, err := kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// kube-controller-manager names another provisioner on it.
	c := get("turns-foreign")
	c.Annotations[ann] = other
	update(c)
	expect("delete turns-foreign")
	// kube-controller-manager binds it to a PV of another node.
	c = bound(get("binds-elsewhere"), "pv-there")
	update(c)
	expect("delete binds-elsewhere")
	// A default class is assigned to it, one of hostpath.
	c = get("turns-ours")
	c.Spec.StorageClassName = ptr.To("hostpath")
	update(c)
	expect("add turns-ours")
	// The foreign claim changes and goes: the handlers see neither.
	c = get("foreign")
	c.Labels = map[string]string{"changed": "yes"}
	update(c)
	if err := kube.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, "foreign", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// An event of ours after them shows they were passed over.
	c = get("ours")
	c.Labels = map[string]string{"changed": "yes"}
	update(c)
	expect("update ours")
	if got := cached(); !slices.Equal(got, []string{"ours", "turns-ours"}) {
		t.Errorf("cached %q, want ours and turns-ours", got)
	}
}

// TestFilteredWatch checks the events a filter passes on, and that a
// stopped watch ends its goroutine even when nobody reads its events.
func TestFilteredWatch(t *testing.T) {
	pv := func(name string, ours bool) *v1.PersistentVolume {
		p := volumeWith(t)
		if ours {
			p = volumeWith(t, storagehelpers.AnnDynamicallyProvisioned+"="+hostpathv1.DefaultProvisionerName)
		}
		p.Name = name
		return p
	}
	f := newFilter(func(p *v1.PersistentVolume) bool { return !responsibility.ForeignVolume(p, configured) })
	// The list remembers the first page's kept objects anew.
	f.kept["stale"] = true
	items := filterList(f, metav1.ListOptions{}, []v1.PersistentVolume{*pv("a", true), *pv("b", false)})
	if len(items) != 1 || items[0].Name != "a" || f.kept["stale"] {
		t.Fatalf("list kept %d items, remembered %v; want a alone", len(items), f.kept)
	}
	for _, tc := range []struct {
		in       watch.Event
		want     watch.EventType
		wantPass bool
	}{
		{watch.Event{Type: watch.Added, Object: pv("c", false)}, "", false},
		{watch.Event{Type: watch.Modified, Object: pv("c", false)}, "", false},
		{watch.Event{Type: watch.Deleted, Object: pv("c", false)}, "", false},
		{watch.Event{Type: watch.Added, Object: pv("d", true)}, watch.Added, true},
		{watch.Event{Type: watch.Modified, Object: pv("d", false)}, watch.Deleted, true},
		{watch.Event{Type: watch.Deleted, Object: pv("d", false)}, "", false},
		{watch.Event{Type: watch.Modified, Object: pv("e", true)}, watch.Modified, true},
		{watch.Event{Type: watch.Deleted, Object: pv("a", false)}, watch.Deleted, true},
		{watch.Event{Type: watch.Bookmark, Object: &v1.PersistentVolume{}}, watch.Bookmark, true},
		{watch.Event{Type: watch.Error, Object: &metav1.Status{}}, watch.Error, true},
	} {
		got, pass := f.event(tc.in)
		if pass != tc.wantPass || pass && got.Type != tc.want {
			t.Errorf("%s %T: passed %v as %s, want %v as %s", tc.in.Type, tc.in.Object, pass, got.Type, tc.wantPass, tc.want)
		}
	}

	in := watch.NewFake()
	w := f.watch(in, metav1.ListOptions{SendInitialEvents: ptr.To(true)})
	if len(f.kept) != 0 {
		t.Errorf("a watch with initial events kept %v remembered, want none", f.kept)
	}
	go in.Add(pv("f", true))
	if e := <-w.ResultChan(); e.Type != watch.Added {
		t.Errorf("got %s, want ADDED", e.Type)
	}
	// An event nobody reads, then Stop: the watch ends (its channel
	// closes) instead of waiting for a reader for ever.
	added := make(chan struct{})
	go func() {
		in.Add(pv("g", true))
		close(added)
	}()
	<-added
	w.Stop()
	for range w.ResultChan() {
	}
}

// TestAskBefore: the upgrade step (Ask.Before) runs before the first list
// and before the first watch, whichever comes first (the watch-list
// protocol lists by a watch), again after a failure, and once it
// succeeded never again; both ask by the selector.
func TestAskBefore(t *testing.T) {
	for _, first := range []string{"list", "watch"} {
		t.Run(first, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := fake.NewClientset()
			runs, fail := 0, true
			ask := Ask{Selector: hostpathv1.WatchSelector("node-a"), Before: func(context.Context) error {
				runs++
				if fail {
					return errors.New("not yet")
				}
				return nil
			}}
			lw := filteredListWatch(kube.CoreV1().PersistentVolumes(),
				func(l *v1.PersistentVolumeList) *[]v1.PersistentVolume { return &l.Items }, func(*v1.PersistentVolume) bool { return true }, ask)
			call := func(what string) error {
				if what == "list" {
					_, err := lw.ListWithContext(ctx, metav1.ListOptions{})
					return err
				}
				w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
				if err == nil {
					w.Stop()
				}
				return err
			}
			if err := call(first); err == nil {
				t.Fatalf("%s succeeded while the step fails", first)
			}
			fail = false
			for _, what := range []string{first, "list", "watch"} {
				if err := call(what); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			if runs != 2 {
				t.Errorf("the step ran %d times, want 2 (a failure, then once)", runs)
			}
			for _, a := range kube.Actions() {
				if r, ok := a.(interface {
					GetListRestrictions() clienttesting.ListRestrictions
				}); ok {
					if got := r.GetListRestrictions().Labels.String(); got != ask.Selector.String() {
						t.Errorf("%s asked by %q, want %q", a.GetVerb(), got, ask.Selector)
					}
				}
			}
		})
	}
}
