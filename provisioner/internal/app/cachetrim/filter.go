package cachetrim

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/responsibility"
)

// Keep decides which claims and PersistentVolumes an instance caches at
// all (see the package doc, "What is never cached").
type Keep struct {
	names   hostpathv1.ProvisionerNames
	node    string
	classes storagelisters.StorageClassLister
	volumes corelisters.PersistentVolumeLister
	// rule says which PVs of another node need nothing of this instance
	// (responsibility.Watch); nil: every PV of hostpath is cached.
	rule *responsibility.Rule
}

// NewKeep returns the decisions of the instance of names on node, which
// looks a claim's StorageClass up in classes and its PV in volumes (nil:
// no claim is taken as bound elsewhere), and whether an instance runs on
// a PV's node in instances (nil: every PV of hostpath is cached).
func NewKeep(names hostpathv1.ProvisionerNames, node string, classes storagelisters.StorageClassLister, volumes corelisters.PersistentVolumeLister,
	instances responsibility.Instances) *Keep {
	k := &Keep{names: names, node: node, classes: classes, volumes: volumes}
	if instances != nil {
		k.rule = responsibility.New(node, instances, nil)
	}
	return k
}

// Claim reports whether the instance caches claim: not when its
// storage-provisioner annotations name another provisioner
// (responsibility.ForeignClaim), nor when it is bound to a node-mode PV of
// another node (boundElsewhere), nor, when no annotation names hostpath,
// when it has no StorageClass or its StorageClass exists and is another
// provisioner's. A claim of a class that does not exist (yet) is cached:
// the class may come and be hostpath's.
func (k *Keep) Claim(claim *v1.PersistentVolumeClaim) bool {
	if responsibility.ForeignClaim(claim, k.names) || k.boundElsewhere(claim) {
		return false
	}
	if responsibility.ClaimNamesHostpath(claim, k.names) {
		return true
	}
	name := storagehelpers.GetPersistentVolumeClaimClass(claim)
	if name == "" {
		return false
	}
	class, err := k.classes.Get(name)
	if err != nil {
		return true
	}
	return responsibility.HostpathName(class.Provisioner, k.names)
}

// boundElsewhere reports whether claim is bound to a node-mode volume of
// another node, whose instance alone acts for it (provisions, resizes,
// clones from it, reports on it): its PV, in the cache, is a node-mode PV
// of one of the instance's names on another node; or, its PV not in the
// cache (a PV settled on another node is not: settledElsewhere), its class
// is not multihost and the first of hostpathv1.ClaimNodeAnnotations set
// names another node. A claim that says nothing either way is kept.
func (k *Keep) boundElsewhere(claim *v1.PersistentVolumeClaim) bool {
	if claim.Spec.VolumeName == "" || k.volumes == nil {
		return false
	}
	if pv, err := k.volumes.Get(claim.Spec.VolumeName); err == nil {
		d, ok := hostpathv1.VolumeDirectoryOf(pv, k.names)
		return ok && !d.Multihost && d.Node != "" && d.Node != k.node
	}
	class, err := k.classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil || class.Parameters[hostpathv1.ParamMode] == hostpathv1.ModeMultihost {
		return false
	}
	for _, key := range hostpathv1.ClaimNodeAnnotations {
		if node := claim.Annotations[key]; node != "" {
			return node != k.node
		}
	}
	return false
}

// Volume reports whether the instance caches pv: when it names a
// directory of a pool with the annotations hostpath.dev/node,
// hostpath.dev/pool or hostpath.dev/directory but is another
// provisioner's (cached as a stub, see the package doc); and when it is
// hostpath's (not responsibility.ForeignVolume), but for a node-mode PV of
// another node that is settled there (settledElsewhere).
func (k *Keep) Volume(pv *v1.PersistentVolume) bool {
	if responsibility.ForeignVolume(pv, k.names) {
		return namesDirectory(pv)
	}
	return !k.settledElsewhere(pv)
}

// settledElsewhere reports whether pv, a PV of hostpath, needs nothing of
// this instance: Bound, not under deletion, not marked with
// hostpath.dev/node-gone-since, and the rule says that another node's
// instance alone watches it (responsibility.Watch: a node-mode PV of one
// of the instance's names on another node that runs an instance, in the
// peer cache). Any other state may need another instance: a PV under
// deletion or Released of a Node that is gone (the instance elected for
// it releases it), one marked gone, one of a node that runs no instance.
// A Bound PV whose Node goes is marked by the reclaim controller's scan of
// the API server (reclaim.Controller, node-gone handling), and the mark
// brings it back into every cache.
func (k *Keep) settledElsewhere(pv *v1.PersistentVolume) bool {
	if k.rule == nil || pv.DeletionTimestamp != nil || pv.Status.Phase != v1.VolumeBound {
		return false
	}
	if _, marked := pv.Annotations[hostpathv1.AnnotationNodeGoneSince]; marked {
		return false
	}
	d, ok := hostpathv1.VolumeDirectoryOf(pv, k.names)
	if !ok {
		return false
	}
	a, err := k.rule.Acts(responsibility.Watch, responsibility.Object{Key: string(pv.UID), Multihost: d.Multihost, Node: d.Node})
	return err == nil && !a.Acts
}

// namesDirectory reports whether pv carries one of the annotations that
// name a directory of a pool.
func namesDirectory(pv *v1.PersistentVolume) bool {
	for _, key := range []string{hostpathv1.AnnotationNode, hostpathv1.AnnotationPool, hostpathv1.AnnotationDirectory} {
		if _, ok := pv.Annotations[key]; ok {
			return true
		}
	}
	return false
}

// Scope is what an instance asks the API server for, and whose decisions
// (Keep) filter what it caches of the answers.
type Scope struct {
	// Names are the instance's provisioner names, and Node its node.
	Names hostpathv1.ProvisionerNames
	Node  string
	// Instances say whether an instance runs on a PV's node (nil: every
	// PV of hostpath is cached); the PV informer waits until
	// InstancesSynced.
	Instances       responsibility.Instances
	InstancesSynced cache.InformerSynced
	// Volumes and Claims select the PVs and claims the API server sends
	// (hostpathv1.WatchSelector); nil asks for every one.
	Volumes, Claims labels.Selector
	// BeforeVolumes and BeforeClaims, when set, run before the first list
	// or watch of PVs and of claims (a watch with the initial events is
	// the list of the watch-list protocol), again at each until one
	// succeeds: the
	// upgrade steps that label the objects made before the label, so that
	// the selectors see them (package relabel).
	BeforeVolumes, BeforeClaims func(context.Context) error
}

// Register makes the claim and PersistentVolume informers of factory those
// of ClaimInformer and VolumeInformer for s, deciding by Keep with the
// factory's StorageClass and PV caches (the claim informer waits for
// both). Call it before anything asks factory for them: the first informer
// of a kind is the factory's.
func Register(factory informers.SharedInformerFactory, s Scope) {
	classes := factory.Storage().V1().StorageClasses()
	keep := NewKeep(s.Names, s.Node, classes.Lister(), nil, s.Instances)
	volumes := factory.InformerFor(&v1.PersistentVolume{}, VolumeInformer(keep.Volume, Ask{Ready: s.InstancesSynced, Selector: s.Volumes, Before: s.BeforeVolumes}))
	keep.volumes = corelisters.NewPersistentVolumeLister(volumes.GetIndexer())
	synced := func() bool { return classes.Informer().HasSynced() && volumes.HasSynced() }
	factory.InformerFor(&v1.PersistentVolumeClaim{}, ClaimInformer(keep.Claim, Ask{Ready: synced, Selector: s.Claims, Before: s.BeforeClaims}))
}

// Ask is how a filtered informer asks the API server: once Ready says
// yes, and Before succeeded (each nil: at once), for the objects Selector
// selects (nil: every one).
type Ask struct {
	Ready    cache.InformerSynced
	Selector labels.Selector
	Before   func(context.Context) error
}

// ClaimInformer returns the constructor of the claim informer for an
// informer factory (SharedInformerFactory.InformerFor): every claim of the
// cluster that ask selects and keep accepts, indexed by namespace as the
// factory's own.
func ClaimInformer(keep func(*v1.PersistentVolumeClaim) bool, ask Ask) internalinterfaces.NewInformerFunc {
	return func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return newFilteredInformer(client, resync, &v1.PersistentVolumeClaim{}, client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll),
			func(l *v1.PersistentVolumeClaimList) *[]v1.PersistentVolumeClaim { return &l.Items }, keep, ask)
	}
}

// VolumeInformer returns the constructor of the PersistentVolume informer
// for an informer factory: every PV of the cluster that ask selects and
// keep accepts.
func VolumeInformer(keep func(*v1.PersistentVolume) bool, ask Ask) internalinterfaces.NewInformerFunc {
	return func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return newFilteredInformer(client, resync, &v1.PersistentVolume{}, client.CoreV1().PersistentVolumes(),
			func(l *v1.PersistentVolumeList) *[]v1.PersistentVolume { return &l.Items }, keep, ask)
	}
}

// listWatcher is the part of the typed client of one kind that a filtered
// informer uses; L is the kind's list.
type listWatcher[L any] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// newFilteredInformer returns a shared informer of example's kind, indexed
// by namespace, over the lists and watches of api that ask as ask says
// and pass through a filter of keep (items gives a list's items). It uses
// the watch-list protocol where client supports it.
func newFilteredInformer[P interface {
	*T
	metav1.Object
}, T any, L runtime.Object](client kubernetes.Interface, resync time.Duration, example runtime.Object,
	api listWatcher[L], items func(L) *[]T, keep func(P) bool, ask Ask) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(filteredListWatch(api, items, keep, ask), client), example,
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
}

// filteredListWatch is the lists and watches of newFilteredInformer: they
// ask api as ask says, and pass through a filter of keep.
func filteredListWatch[P interface {
	*T
	metav1.Object
}, T any, L runtime.Object](api listWatcher[L], items func(L) *[]T, keep func(P) bool, ask Ask) *cache.ListWatch {
	f := newFilter(keep)
	before := untilDone(ask.Before)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if err := waitFor(ctx, ask.Ready); err != nil {
				return nil, err
			}
			if err := before(ctx); err != nil {
				return nil, err
			}
			ask.selecting(&opts)
			list, err := api.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			all := items(list)
			*all = filterList(f, opts, *all)
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if err := waitFor(ctx, ask.Ready); err != nil {
				return nil, err
			}
			// The watch-list protocol lists by a watch with the initial
			// events: the reflector may never call List.
			if err := before(ctx); err != nil {
				return nil, err
			}
			ask.selecting(&opts)
			w, err := api.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return f.watch(w, opts), nil
		},
	}
}

// untilDone returns a function that runs do until it once succeeds, and
// does nothing after; for a nil do, nothing.
func untilDone(do func(context.Context) error) func(context.Context) error {
	var (
		mu   sync.Mutex
		done = do == nil
	)
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return nil
		}
		if err := do(ctx); err != nil {
			return err
		}
		done = true
		return nil
	}
}

// selecting sets the label selector of opts to ask's, if any.
func (ask Ask) selecting(opts *metav1.ListOptions) {
	if ask.Selector != nil {
		opts.LabelSelector = ask.Selector.String()
	}
}

// waitFor waits until ready says yes, or ctx is done; a nil ready is
// ready.
func waitFor(ctx context.Context, ready cache.InformerSynced) error {
	if ready == nil || ready() {
		return nil
	}
	if !cache.WaitForCacheSync(ctx.Done(), ready) {
		return fmt.Errorf("wait for the caches the filter reads: %w", context.Cause(ctx))
	}
	return nil
}

// filter passes on the objects keep accepts, from lists and watches, and
// remembers the keys it passed on, so that an object it passed on and
// that keep now refuses leaves the cache: its update becomes a deletion.
// The informer's reflector calls List and Watch one at a time; the lock
// covers a watch still draining while the next list starts.
type filter[P interface {
	*T
	metav1.Object
}, T any] struct {
	keep func(P) bool
	mu   sync.Mutex
	kept map[string]bool
}

// newFilter returns a filter of keep.
func newFilter[P interface {
	*T
	metav1.Object
}, T any](keep func(P) bool) *filter[P, T] {
	return &filter[P, T]{keep: keep, kept: map[string]bool{}}
}

// key is an object's key in the informer's cache.
func key(obj metav1.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// filterList returns the items of one page of a list that f keeps, in a
// new slice: the cache then holds no reference to the page. The first
// page of a list (no continue token) starts the remembered keys anew.
func filterList[P interface {
	*T
	metav1.Object
}, T any](f *filter[P, T], opts metav1.ListOptions, items []T) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if opts.Continue == "" {
		clear(f.kept)
	}
	var out []T
	for i := range items {
		obj := P(&items[i])
		if f.keep(obj) {
			f.kept[key(obj)] = true
			out = append(out, items[i])
		}
	}
	return out
}

// watch returns w with only the events of f's objects: an object keep
// accepts comes through (and is remembered); one it refuses is dropped,
// unless f passed it on before: then its update comes as a deletion, and
// its deletion as one. Bookmarks and errors come through. A watch that
// starts with the initial events (the watch-list protocol) starts the
// remembered keys anew.
func (f *filter[P, T]) watch(w watch.Interface, opts metav1.ListOptions) watch.Interface {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		f.mu.Lock()
		clear(f.kept)
		f.mu.Unlock()
	}
	return newFilteredWatch(w, f.event)
}

// event is f's decision on one watch event.
func (f *filter[P, T]) event(e watch.Event) (watch.Event, bool) {
	obj, ok := e.Object.(P)
	if !ok || (e.Type != watch.Added && e.Type != watch.Modified && e.Type != watch.Deleted) {
		return e, true
	}
	k := key(obj)
	keep := f.keep(obj)
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.kept[k]
	switch {
	case e.Type == watch.Deleted:
		delete(f.kept, k)
		return e, was || keep
	case keep:
		f.kept[k] = true
		return e, true
	case was:
		delete(f.kept, k)
		return watch.Event{Type: watch.Deleted, Object: e.Object}, true
	}
	return e, false
}

// filteredWatch is a watch whose events go through a decision first. It is
// apimachinery's watch.Filter, but for one thing: once Stop is called it
// stops sending, where watch.Filter's goroutine blocks for ever on an
// event nobody reads (the reflector stops a watch and never drains it,
// every few minutes).
type filteredWatch struct {
	in     watch.Interface
	out    chan watch.Event
	decide func(watch.Event) (watch.Event, bool)
	stop   chan struct{}
	once   sync.Once
}

// newFilteredWatch starts passing the events of in through decide.
func newFilteredWatch(in watch.Interface, decide func(watch.Event) (watch.Event, bool)) *filteredWatch {
	w := &filteredWatch{in: in, out: make(chan watch.Event), decide: decide, stop: make(chan struct{})}
	go w.loop()
	return w
}

// ResultChan returns the events that decide kept.
func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop stops the watch and its goroutine.
func (w *filteredWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.in.Stop()
}

// loop sends on the events decide keeps until in ends or Stop.
func (w *filteredWatch) loop() {
	defer close(w.out)
	for e := range w.in.ResultChan() {
		e, ok := w.decide(e)
		if !ok {
			continue
		}
		select {
		case w.out <- e:
		case <-w.stop:
			return
		}
	}
}
