// Package benchprovision measures how fast the hostpath provisioner turns
// claims into volumes on a running cluster, and how fast it removes them: it
// creates many pinned claims at once in a fresh namespace, times the PVs, the
// binds and the claim->PV latencies as its watches see them, then deletes the
// namespace and times until every PV and every volume directory is gone.
// scripts/bench-provision.sh runs it (e2e/cmd/benchprovision) once per
// provisioner configuration and prints the comparison (Compare).
package benchprovision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

const (
	// NodeAnnotation pins a claim to a node (README, "Provisioner").
	NodeAnnotation = "hostpath.dev/provision-on-node"
	// PVNodeAnnotation names the node of a provisioned PV.
	PVNodeAnnotation = "hostpath.dev/node"
	// FakeNodeLabel marks fake nodes (scripts/fake-nodes.sh); they run no
	// provisioner, so claims are never pinned to them.
	FakeNodeLabel = "hostpath.dev/fake-node"
	// RunLabel is set on the benchmark's namespace, with Options.RunID as
	// value, so a script can find and delete what a killed run left.
	RunLabel = "hostpath.dev/bench-run"
)

// Options says what one benchmark run does.
type Options struct {
	// Label names the run in the results ("defaults", "baseline").
	Label string
	// Settings describes the provisioner configuration measured, for the table.
	Settings string
	// RunID is the value of RunLabel on the namespace.
	RunID string
	// Count is the number of claims.
	Count int
	// StorageClass is the claims' class; it must provision at once (Immediate).
	StorageClass string
	// Nodes the claims are spread over, round robin; empty: every node
	// without FakeNodeLabel=true.
	Nodes []string
	// Size is each claim's request.
	Size resource.Quantity
	// Workers is the number of parallel claim creators.
	Workers int
	// Timeout bounds each wait: all PVs, all binds, all deleted, namespace gone.
	Timeout time.Duration
	// NodesDir, when set, is where each node's pool is visible on this machine
	// (.cluster/nodes): the directory of a PV with path PoolPath/X on node N is
	// NodesDir/N/hpvolumes/X. Run then checks that every directory exists once
	// provisioned and times until they are all gone.
	NodesDir string
	// PoolPath is the pool's path on the nodes (/var/hpvolumes).
	PoolPath string
	// Poll is how often the volume directories are looked at while waiting.
	Poll time.Duration
	// Logf prints progress; nil: none.
	Logf func(format string, args ...any)
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch {
	case o.Count < 1:
		return fmt.Errorf("count must be at least 1, got %d", o.Count)
	case o.StorageClass == "":
		return errors.New("storage class must not be empty")
	case o.Workers < 1:
		return fmt.Errorf("workers must be at least 1, got %d", o.Workers)
	case o.Timeout <= 0:
		return fmt.Errorf("timeout must be positive, got %v", o.Timeout)
	case o.Poll <= 0:
		return fmt.Errorf("poll interval must be positive, got %v", o.Poll)
	case o.NodesDir != "" && !strings.HasPrefix(o.PoolPath, "/"):
		return fmt.Errorf("pool path must be absolute, got %q", o.PoolPath)
	}
	return nil
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// Result holds the figures of one run; times are in seconds.
type Result struct {
	Label     string   `json:"label"`
	Settings  string   `json:"settings"`
	Count     int      `json:"count"`
	Nodes     []string `json:"nodes"`
	Namespace string   `json:"namespace"`
	// Started is when the first claim was sent.
	Started time.Time `json:"started"`
	// CreateSeconds: from the first claim sent until every create returned.
	CreateSeconds float64 `json:"createSeconds"`
	// AllPVsSeconds: from the first claim sent until the last PV was seen.
	AllPVsSeconds float64 `json:"allPVsSeconds"`
	// AllBoundSeconds: from the first claim sent until the last claim was Bound.
	AllBoundSeconds float64 `json:"allBoundSeconds"`
	// PVsPerSecond is Count / AllPVsSeconds.
	PVsPerSecond float64 `json:"pvsPerSecond"`
	// BindsPerSecond is Count / AllBoundSeconds.
	BindsPerSecond float64 `json:"bindsPerSecond"`
	// LatencyP50Seconds, LatencyP95Seconds: from a claim's create returning
	// until its PV was seen (nearest rank).
	LatencyP50Seconds float64 `json:"latencyP50Seconds"`
	LatencyP95Seconds float64 `json:"latencyP95Seconds"`
	// Dirs is the number of volume directories found after provisioning
	// (0 when Options.NodesDir is empty).
	Dirs int `json:"dirs"`
	// PVsGoneSeconds: from the namespace delete until the last PV was gone.
	PVsGoneSeconds float64 `json:"pvsGoneSeconds"`
	// DirsGoneSeconds: from the namespace delete until no volume directory
	// was left (at Options.Poll resolution; 0 without NodesDir).
	DirsGoneSeconds float64 `json:"dirsGoneSeconds"`
	// DeletesPerSecond is Count / the larger of PVsGoneSeconds and DirsGoneSeconds.
	DeletesPerSecond float64 `json:"deletesPerSecond"`
}

// tracker records when the watches first saw each claim's PV, each claim
// Bound and each PV deleted.
type tracker struct {
	mu      sync.Mutex
	ns      string
	now     func() time.Time
	pvSeen  map[types.UID]time.Time // claim UID -> first PV for it
	pvs     map[types.UID]*corev1.PersistentVolume
	bound   map[types.UID]time.Time // claim UID -> first seen Bound
	pvGone  map[string]time.Time    // PV name -> deletion seen
	changed chan struct{}
}

func newTracker(ns string, now func() time.Time) *tracker {
	return &tracker{
		ns: ns, now: now,
		pvSeen:  map[types.UID]time.Time{},
		pvs:     map[types.UID]*corev1.PersistentVolume{},
		bound:   map[types.UID]time.Time{},
		pvGone:  map[string]time.Time{},
		changed: make(chan struct{}, 1),
	}
}

func (t *tracker) notify() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tracker) ours(pv *corev1.PersistentVolume) bool {
	return pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == t.ns && pv.Spec.ClaimRef.UID != ""
}

func (t *tracker) onPV(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || !t.ours(pv) {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := pv.Spec.ClaimRef.UID
	if _, seen := t.pvSeen[uid]; !seen {
		t.pvSeen[uid] = now
	}
	t.pvs[uid] = pv
	t.notify()
}

func (t *tracker) onPVDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || !t.ours(pv) {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.pvGone[pv.Name]; !seen {
		t.pvGone[pv.Name] = now
	}
	t.notify()
}

func (t *tracker) onClaim(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || pvc.Namespace != t.ns || pvc.Status.Phase != corev1.ClaimBound {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.bound[pvc.UID]; !seen {
		t.bound[pvc.UID] = now
	}
	t.notify()
}

// waitFor returns once cond (called with t.mu held) is true, checking it at
// every watch event and every poll interval; it fails after timeout.
func (t *tracker) waitFor(ctx context.Context, timeout, poll time.Duration, what string, cond func() (bool, string)) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		t.mu.Lock()
		ok, state := cond()
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (%s): %w", what, state, ctx.Err())
		case <-timer.C:
			return fmt.Errorf("timed out after %v waiting for %s (%s)", timeout, what, state)
		case <-t.changed:
		case <-tick.C:
		}
	}
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of values;
// 0 for none. values is sorted in place.
func Percentile(values []time.Duration, p float64) time.Duration {
	if len(values) == 0 {
		return 0
	}
	sort.Slice(values, func(i, j int) bool { return values[i] < values[j] })
	rank := int(p/100*float64(len(values)) + 0.999999999)
	rank = min(max(rank, 1), len(values))
	return values[rank-1]
}

// RealNodes lists the nodes without FakeNodeLabel=true, sorted by name.
func RealNodes(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: FakeNodeLabel + "!=true"})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, errors.New("no real nodes")
	}
	return names, nil
}

// HostDir is where the directory of pv is on this machine, given the pool's
// path on the nodes and the folder holding each node's files (NodesDir).
func HostDir(pv *corev1.PersistentVolume, nodesDir, poolPath string) (string, error) {
	node := pv.Annotations[PVNodeAnnotation]
	if node == "" || strings.ContainsAny(node, "/") {
		return "", fmt.Errorf("PV %s: bad or missing annotation %s %q", pv.Name, PVNodeAnnotation, node)
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("PV %s is not a hostPath volume", pv.Name)
	}
	rel, ok := strings.CutPrefix(filepath.Clean(pv.Spec.HostPath.Path), strings.TrimSuffix(poolPath, "/")+"/")
	if !ok || rel == "" || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("PV %s: path %q is not in pool %s", pv.Name, pv.Spec.HostPath.Path, poolPath)
	}
	return filepath.Join(nodesDir, node, "hpvolumes", rel), nil
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func perSecond(n int, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(n) / s
}

// Run does one benchmark run with client (whose rate limits must not be the
// bottleneck). Whatever happens, it deletes the namespace it created before
// returning (waiting at most Options.Timeout when the run failed).
func Run(ctx context.Context, client kubernetes.Interface, o Options) (res Result, err error) {
	if err := o.Validate(); err != nil {
		return res, err
	}
	nodes := o.Nodes
	if len(nodes) == 0 {
		if nodes, err = RealNodes(ctx, client); err != nil {
			return res, err
		}
	}
	res = Result{Label: o.Label, Settings: o.Settings, Count: o.Count, Nodes: nodes}

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hostpath-bench-"}}
	if o.RunID != "" {
		nsObj.Labels = map[string]string{RunLabel: o.RunID}
	}
	nsObj, err = client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{})
	if err != nil {
		return res, fmt.Errorf("create namespace: %w", err)
	}
	ns := nsObj.Name
	res.Namespace = ns
	o.logf("%s: namespace %s, %d claims of class %s over %s", o.Label, ns, o.Count, o.StorageClass, strings.Join(nodes, ", "))
	nsDeleted := false
	defer func() {
		if nsDeleted {
			return
		}
		// Clean up after a failure, also when ctx was cancelled.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := client.CoreV1().Namespaces().Delete(cctx, ns, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("delete namespace %s: %w", ns, derr))
		}
	}()

	t := newTracker(ns, time.Now)
	ictx, stopInformers := context.WithCancel(ctx)
	pvFactory := informers.NewSharedInformerFactory(client, 0)
	pvcFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	defer func() {
		stopInformers() // before Shutdown, which waits for the informers to stop
		pvFactory.Shutdown()
		pvcFactory.Shutdown()
	}()
	if _, err := pvFactory.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.onPV,
		UpdateFunc: func(_, obj any) { t.onPV(obj) },
		DeleteFunc: t.onPVDelete,
	}); err != nil {
		return res, err
	}
	if _, err := pvcFactory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.onClaim,
		UpdateFunc: func(_, obj any) { t.onClaim(obj) },
	}); err != nil {
		return res, err
	}
	pvFactory.Start(ictx.Done())
	pvcFactory.Start(ictx.Done())
	sctx, cancelSync := context.WithTimeout(ictx, o.Timeout)
	for typ, ok := range pvFactory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			cancelSync()
			return res, fmt.Errorf("%v informer did not sync", typ)
		}
	}
	for typ, ok := range pvcFactory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			cancelSync()
			return res, fmt.Errorf("%v informer did not sync", typ)
		}
	}
	cancelSync()

	// Create every claim, Workers at a time, as fast as the client goes.
	created := make([]time.Time, o.Count)
	uids := make([]types.UID, o.Count)
	errs := make([]error, o.Count)
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	res.Started = start
	for range min(o.Workers, o.Count) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				pvc := claim(fmt.Sprintf("bench-%05d", i), nodes[i%len(nodes)], o.StorageClass, o.Size)
				got, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
				created[i] = time.Now()
				if err != nil {
					errs[i] = fmt.Errorf("create claim %s: %w", pvc.Name, err)
					continue
				}
				uids[i] = got.UID
			}
		}()
	}
	for i := range o.Count {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	res.CreateSeconds = seconds(time.Since(start))
	o.logf("%s: %d claims created in %.2fs", o.Label, o.Count, res.CreateSeconds)

	countOf := func(m map[types.UID]time.Time) int {
		n := 0
		for _, uid := range uids {
			if _, ok := m[uid]; ok {
				n++
			}
		}
		return n
	}
	lastOf := func(m map[types.UID]time.Time) time.Time {
		var last time.Time
		for _, uid := range uids {
			if m[uid].After(last) {
				last = m[uid]
			}
		}
		return last
	}
	if err := t.waitFor(ctx, o.Timeout, o.Poll, "every PV", func() (bool, string) {
		n := countOf(t.pvSeen)
		return n == o.Count, fmt.Sprintf("%d of %d PVs", n, o.Count)
	}); err != nil {
		return res, err
	}
	t.mu.Lock()
	res.AllPVsSeconds = seconds(lastOf(t.pvSeen).Sub(start))
	latencies := make([]time.Duration, o.Count)
	for i, uid := range uids {
		latencies[i] = max(t.pvSeen[uid].Sub(created[i]), 0)
	}
	pvs := make([]*corev1.PersistentVolume, 0, o.Count)
	for _, uid := range uids {
		pvs = append(pvs, t.pvs[uid])
	}
	t.mu.Unlock()
	res.PVsPerSecond = perSecond(o.Count, res.AllPVsSeconds)
	res.LatencyP50Seconds = seconds(Percentile(latencies, 50))
	res.LatencyP95Seconds = seconds(Percentile(latencies, 95))
	o.logf("%s: all %d PVs after %.2fs", o.Label, o.Count, res.AllPVsSeconds)

	if err := t.waitFor(ctx, o.Timeout, o.Poll, "every claim Bound", func() (bool, string) {
		n := countOf(t.bound)
		return n == o.Count, fmt.Sprintf("%d of %d Bound", n, o.Count)
	}); err != nil {
		return res, err
	}
	t.mu.Lock()
	res.AllBoundSeconds = seconds(lastOf(t.bound).Sub(start))
	t.mu.Unlock()
	res.BindsPerSecond = perSecond(o.Count, res.AllBoundSeconds)
	o.logf("%s: all %d claims Bound after %.2fs", o.Label, o.Count, res.AllBoundSeconds)

	var dirs []string
	if o.NodesDir != "" {
		for _, pv := range pvs {
			dir, err := HostDir(pv, o.NodesDir, o.PoolPath)
			if err != nil {
				return res, err
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return res, fmt.Errorf("PV %s is there but its directory %s is not: %v", pv.Name, dir, err)
			}
			dirs = append(dirs, dir)
		}
		res.Dirs = len(dirs)
	}

	// Delete the namespace; time until every PV and directory is gone.
	delStart := time.Now()
	if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return res, fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	nsDeleted = true
	var dirsGone time.Time
	leftDirs := func() int {
		n := 0
		for _, d := range dirs {
			if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
				n++
			}
		}
		return n
	}
	if err := t.waitFor(ctx, o.Timeout, o.Poll, "every PV and directory gone", func() (bool, string) {
		gone := 0
		for _, pv := range pvs {
			if _, ok := t.pvGone[pv.Name]; ok {
				gone++
			}
		}
		left := 0
		if dirsGone.IsZero() {
			if left = leftDirs(); left == 0 {
				dirsGone = time.Now()
			}
		}
		return gone == len(pvs) && left == 0, fmt.Sprintf("%d of %d PVs gone, %d directories left", gone, len(pvs), left)
	}); err != nil {
		return res, err
	}
	t.mu.Lock()
	var lastGone time.Time
	for _, pv := range pvs {
		lastGone = maxTime(lastGone, t.pvGone[pv.Name])
	}
	t.mu.Unlock()
	res.PVsGoneSeconds = seconds(lastGone.Sub(delStart))
	if len(dirs) > 0 {
		res.DirsGoneSeconds = seconds(dirsGone.Sub(delStart))
	}
	res.DeletesPerSecond = perSecond(o.Count, max(res.PVsGoneSeconds, res.DirsGoneSeconds))
	o.logf("%s: all PVs gone after %.2fs, all directories after %.2fs", o.Label, res.PVsGoneSeconds, res.DirsGoneSeconds)

	// Not timed: the namespace itself, so the next run starts clean.
	nctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for {
		_, err := client.CoreV1().Namespaces().Get(nctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if nctx.Err() != nil {
			return res, fmt.Errorf("namespace %s not gone after %v", ns, o.Timeout)
		}
		select {
		case <-nctx.Done():
		case <-time.After(o.Poll):
		}
	}
	return res, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// claim is one benchmark claim pinned to node.
func claim(name, node, class string, size resource.Quantity) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{NodeAnnotation: node}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}
