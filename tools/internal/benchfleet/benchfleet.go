// Package benchfleet measures hostpath with many nodes on one machine (a
// fleet, package fleet: fake nodes, each with a manager and a provisioner
// process and their pod objects), on the running local cluster:
//
//   - Instances: N claims of the node-mode class over the first K fleet
//     nodes (package benchprovision's Run), with the API server's requests
//     before and after: the API writes per volume must not grow with K
//     (instances that do not own a claim write nothing).
//   - Multihost: the create->Bound latency of multihost claims made one at
//     a time, with E managers in the pool (the real nodes' and E minus
//     those fleet members').
//   - Backfill: with B multihost volumes Bound, one more node joins; the
//     time from its manager pod turning Ready until the host definer has
//     made every directory there (on its disk), its HostDefinition is Ready
//     and every PV lists it.
//
// The steps run in the order of the fleet size they need (the fleet only
// grows), and the fleet is closed at the end, also on failure.
package benchfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"
	hostpathinformers "hostpath.dev/api/generated/informers/externalversions"
	hostpathlisters "hostpath.dev/api/generated/listers/hostpath/v1"
	hostpathv1 "hostpath.dev/api/hostpath/v1"

	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/framework/localcluster"
	"hostpath.dev/tools/internal/benchprovision"
	"hostpath.dev/tools/internal/fleet"
)

// Options say what to measure.
type Options struct {
	// Fleet makes the fleet.
	Fleet fleet.Options
	// Instances are the instance runs: N claims over K fleet nodes each.
	Instances []InstanceRun
	// NodeClass is the node-mode class of the instance runs (Immediate).
	NodeClass string
	// Endpoints are the multihost pool sizes measured (every manager of the
	// pool, the real nodes' included); MultihostClaims claims each, one at a
	// time, of MultihostClass (multihost, Immediate).
	Endpoints       []int
	MultihostClaims int
	MultihostClass  string
	// Backfill is the number of multihost volumes a new node gets; 0: no
	// backfill step.
	Backfill int
	// Pool is the classes' pool.
	Pool string
	// Timeout bounds each wait.
	Timeout time.Duration
	// Logf prints progress.
	Logf cli.Printf
}

// InstanceRun is one instance run: Claims claims over Instances fleet nodes.
type InstanceRun struct {
	Instances, Claims int
}

// Result is what Run measured.
type Result struct {
	Date      time.Time         `json:"date"`
	RealNodes []string          `json:"realNodes"`
	Instances []InstanceResult  `json:"instances,omitempty"`
	Multihost []MultihostResult `json:"multihost,omitempty"`
	Backfill  *BackfillResult   `json:"backfill,omitempty"`
}

// InstanceResult is one instance run's figures.
type InstanceResult struct {
	Instances int                   `json:"instances"`
	Run       benchprovision.Result `json:"run"`
	// Footprint is the fleet's processes after the run.
	Footprint Footprint `json:"footprint"`
}

// MultihostResult is the latency of multihost claims over Endpoints
// managers, in seconds, each from the claim's create returning until it was
// seen Bound.
type MultihostResult struct {
	Endpoints int       `json:"endpoints"`
	Latencies []float64 `json:"latencies"`
}

// BackfillResult is the backfill of Volumes multihost volumes onto a new
// node, in seconds from its manager pod turning Ready.
type BackfillResult struct {
	Volumes int    `json:"volumes"`
	Node    string `json:"node"`
	// DirsSeconds: until every directory was on the node's disk.
	DirsSeconds float64 `json:"dirsSeconds"`
	// ReadySeconds: until its HostDefinition was Ready counting them all.
	ReadySeconds float64 `json:"readySeconds"`
	// PVsSeconds: until every PV listed the node in hostpath.dev/nodes.
	PVsSeconds float64 `json:"pvsSeconds"`
}

// Footprint sums and maxes the peak RSS (VmHWM) of each role's processes.
type Footprint struct {
	Processes         int     `json:"processes"`
	ProvisionerSumMiB float64 `json:"provisionerSumMiB"`
	ProvisionerMaxMiB float64 `json:"provisionerMaxMiB"`
	ManagerSumMiB     float64 `json:"managerSumMiB"`
	ManagerMaxMiB     float64 `json:"managerMaxMiB"`
}

// step is one measurement at a fleet size.
type step struct {
	size int
	name string
	run  func(ctx context.Context) error
}

// Run measures. kube must not be rate limited (the benchmark's own client).
func Run(ctx context.Context, kube kubernetes.Interface, hp hostpathclient.Interface, o Options) (res Result, err error) {
	b := &bench{kube: kube, hp: hp, o: o}
	real, err := localcluster.RealNodes(ctx, kube)
	if err != nil {
		return res, err
	}
	b.res = Result{Date: time.Now().UTC(), RealNodes: real}
	var steps []step
	if o.Backfill > 0 {
		steps = append(steps, step{size: 1, name: "backfill", run: b.backfill})
	}
	for _, e := range o.Endpoints {
		if e <= len(real) {
			return b.res, fmt.Errorf("a multihost pool of %d endpoints needs more than the %d real nodes", e, len(real))
		}
		steps = append(steps, step{size: e - len(real), name: fmt.Sprintf("multihost over %d", e), run: func(ctx context.Context) error { return b.multihost(ctx, e) }})
	}
	for _, r := range o.Instances {
		steps = append(steps, step{size: r.Instances, name: fmt.Sprintf("%d claims over %d instances", r.Claims, r.Instances), run: func(ctx context.Context) error { return b.instances(ctx, r) }})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].size < steps[j].size })

	// The waits read informer caches: polling lists of 1000 objects would
	// load the API server the run measures.
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	core := informers.NewSharedInformerFactory(kube, 0)
	b.pvs = core.Core().V1().PersistentVolumes().Lister()
	b.pvcs = core.Core().V1().PersistentVolumeClaims().Lister()
	defs := hostpathinformers.NewSharedInformerFactory(hp, 0)
	b.defs = defs.Hostpath().V1().HostDefinitions().Lister()
	core.Start(ictx.Done())
	defs.Start(ictx.Done())
	for typ, ok := range core.WaitForCacheSync(ictx.Done()) {
		if !ok {
			return b.res, fmt.Errorf("cache of %v not synced", typ)
		}
	}
	for typ, ok := range defs.WaitForCacheSync(ictx.Done()) {
		if !ok {
			return b.res, fmt.Errorf("cache of %v not synced", typ)
		}
	}

	b.fleet, err = fleet.New(ctx, kube, o.Fleet)
	if err != nil {
		return b.res, err
	}
	defer func() {
		o.Logf.Printf("Closing the fleet of %d nodes", len(b.fleet.Nodes()))
		err = errors.Join(err, b.fleet.Close(ctx))
	}()
	for _, s := range steps {
		if n := len(b.fleet.Nodes()); s.size > n {
			t0 := time.Now()
			if err := b.fleet.Scale(ctx, s.size); err != nil {
				return b.res, fmt.Errorf("grow the fleet to %d: %w", s.size, err)
			}
			o.Logf.Printf("Fleet grown from %d to %d nodes in %.1fs", n, s.size, time.Since(t0).Seconds())
		}
		o.Logf.Printf("Step: %s (fleet of %d)", s.name, len(b.fleet.Nodes()))
		if err := s.run(ctx); err != nil {
			return b.res, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return b.res, nil
}

// bench is a Run in progress.
type bench struct {
	kube  kubernetes.Interface
	hp    hostpathclient.Interface
	o     Options
	res   Result
	fleet *fleet.Fleet
	// Informer caches of every PV, claim and HostDefinition.
	pvs  corelisters.PersistentVolumeLister
	pvcs corelisters.PersistentVolumeClaimLister
	defs hostpathlisters.HostDefinitionLister
}

// instances is one instance run over the first r.Instances fleet nodes.
func (b *bench) instances(ctx context.Context, r InstanceRun) error {
	res, err := benchprovision.Run(ctx, b.kube, benchprovision.Options{
		Label:        fmt.Sprintf("ours@K=%d", r.Instances),
		Settings:     fmt.Sprintf("%d provisioner and %d manager processes on fake nodes", r.Instances, r.Instances),
		Count:        r.Claims,
		StorageClass: b.o.NodeClass,
		Nodes:        b.fleet.Nodes()[:r.Instances],
		Size:         resource.MustParse("1Mi"),
		Workers:      16,
		Timeout:      b.o.Timeout,
		NodesDir:     b.o.Fleet.Dir,
		PoolPath:     localcluster.PoolPath,
		Poll:         50 * time.Millisecond,
		APIMetrics:   apimetrics.APIServerMetrics(b.kube),
		Logf:         b.o.Logf,
	})
	if err != nil {
		return err
	}
	fp, err := footprint(b.fleet.Members())
	if err != nil {
		return err
	}
	b.res.Instances = append(b.res.Instances, InstanceResult{Instances: r.Instances, Run: res, Footprint: fp})
	return nil
}

// multihost makes MultihostClaims claims one at a time with e managers in
// the pool.
func (b *bench) multihost(ctx context.Context, e int) error {
	if err := b.waitDefined(ctx, e); err != nil {
		return err
	}
	ns, done, err := b.namespace(ctx, "hostpath-bench-multihost-")
	if err != nil {
		return err
	}
	defer done()
	out := MultihostResult{Endpoints: e}
	for i := range b.o.MultihostClaims {
		pvc := claim(fmt.Sprintf("shared-%03d", i), b.o.MultihostClass)
		if _, err := b.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return err
		}
		t0 := time.Now()
		var pvName string
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, b.o.Timeout, true, func(ctx context.Context) (bool, error) {
			got, err := b.pvcs.PersistentVolumeClaims(ns).Get(pvc.Name)
			if apierrors.IsNotFound(err) {
				return false, nil // not in the cache yet
			}
			if err != nil {
				return false, err
			}
			pvName = got.Spec.VolumeName
			return got.Status.Phase == corev1.ClaimBound, nil
		}); err != nil {
			return fmt.Errorf("claim %s/%s not Bound: %w", ns, pvc.Name, err)
		}
		out.Latencies = append(out.Latencies, time.Since(t0).Seconds())
		pv, err := b.kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := len(strings.Split(pv.Annotations[hostpathv1.AnnotationNodes], ",")); got != e {
			return fmt.Errorf("PV %s is on %d nodes (%s), want %d", pv.Name, got, pv.Annotations[hostpathv1.AnnotationNodes], e)
		}
	}
	b.res.Multihost = append(b.res.Multihost, out)
	b.o.Logf.Printf("Multihost over %d managers: %d claims, create->Bound %s", e, len(out.Latencies), summary(out.Latencies))
	return nil
}

// backfill makes Backfill multihost volumes on the real nodes and the
// first fleet node, then adds the second fleet node.
func (b *bench) backfill(ctx context.Context) error {
	before := len(b.res.RealNodes) + len(b.fleet.Nodes())
	if err := b.waitDefined(ctx, before); err != nil {
		return err
	}
	ns, done, err := b.namespace(ctx, "hostpath-bench-backfill-")
	if err != nil {
		return err
	}
	defer done()
	n := b.o.Backfill
	t0 := time.Now()
	if err := b.createBound(ctx, ns, n); err != nil {
		return err
	}
	b.o.Logf.Printf("Backfill: %d multihost claims Bound over %d nodes in %.1fs", n, before, time.Since(t0).Seconds())

	if err := b.fleet.Scale(ctx, len(b.fleet.Nodes())+1); err != nil {
		return err
	}
	m := b.fleet.Members()[len(b.fleet.Nodes())-1]
	out := &BackfillResult{Volumes: n, Node: m.Node}
	pool := fmt.Sprintf("%s/%s", m.Dir, "hpvolumes")
	var dirsAt, readyAt, pvsAt time.Time
	if err := b.poll(ctx, "the new node's directories, definition and PVs", func(ctx context.Context) (bool, string, error) {
		now := time.Now()
		if dirsAt.IsZero() {
			entries, err := os.ReadDir(pool)
			if err != nil {
				return false, "", err
			}
			if len(entries) >= n {
				dirsAt = now
			}
		}
		if readyAt.IsZero() {
			hd, err := b.definition(ctx, m.Node)
			if err != nil {
				return false, "", err
			}
			if hd != nil && hd.Status.Phase == hostpathv1.PhaseReady && int(hd.Status.MultihostVolumes) >= n {
				readyAt = now
			}
		}
		if pvsAt.IsZero() {
			listed, err := b.pvsListing(ctx, ns, m.Node)
			if err != nil {
				return false, "", err
			}
			if listed == n {
				pvsAt = now
			}
		}
		return !dirsAt.IsZero() && !readyAt.IsZero() && !pvsAt.IsZero(),
			fmt.Sprintf("directories %v, definition %v, PVs %v", !dirsAt.IsZero(), !readyAt.IsZero(), !pvsAt.IsZero()), nil
	}); err != nil {
		return err
	}
	out.DirsSeconds = dirsAt.Sub(m.ManagerReady).Seconds()
	out.ReadySeconds = readyAt.Sub(m.ManagerReady).Seconds()
	out.PVsSeconds = pvsAt.Sub(m.ManagerReady).Seconds()
	b.res.Backfill = out
	b.o.Logf.Printf("Backfill of %d volumes onto %s: directories %.2fs, definition Ready %.2fs, PVs %.2fs", n, m.Node, out.DirsSeconds, out.ReadySeconds, out.PVsSeconds)
	return nil
}

// createBound creates n multihost claims in ns, 16 at a time, and waits
// until they are all Bound.
func (b *bench) createBound(ctx context.Context, ns string, n int) error {
	errs := make([]error, n)
	workqueue.ParallelizeUntil(ctx, 16, n, func(i int) {
		_, errs[i] = b.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim(fmt.Sprintf("shared-%05d", i), b.o.MultihostClass), metav1.CreateOptions{})
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return b.poll(ctx, fmt.Sprintf("%d multihost claims Bound", n), func(ctx context.Context) (bool, string, error) {
		claims, err := b.pvcs.PersistentVolumeClaims(ns).List(labels.Everything())
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, c := range claims {
			if c.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		return bound == n, fmt.Sprintf("%d Bound", bound), nil
	})
}

// pvsListing counts the PVs of ns's claims whose hostpath.dev/nodes lists
// node.
func (b *bench) pvsListing(ctx context.Context, ns, node string) (int, error) {
	pvs, err := b.pvs.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pv := range pvs {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns {
			continue
		}
		if slices.Contains(strings.Split(pv.Annotations[hostpathv1.AnnotationNodes], ","), node) {
			n++
		}
	}
	return n, nil
}

// definition returns the HostDefinition of the pool on node, nil when none.
func (b *bench) definition(ctx context.Context, node string) (*hostpathv1.HostDefinition, error) {
	defs, err := b.defs.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, hd := range defs {
		if hd.Spec.NodeName == node && hd.Spec.Pool == b.o.Pool && hd.DeletionTimestamp == nil {
			return hd, nil
		}
	}
	return nil, nil
}

// waitDefined waits until n nodes have a Ready definition of the pool
// whose manager pod is Ready: the multihost targets.
func (b *bench) waitDefined(ctx context.Context, n int) error {
	return b.poll(ctx, fmt.Sprintf("%d Ready HostDefinitions of pool %s", n, b.o.Pool), func(ctx context.Context) (bool, string, error) {
		defs, err := b.defs.List(labels.Everything())
		if err != nil {
			return false, "", err
		}
		ready, other := 0, 0
		for _, hd := range defs {
			if hd.Spec.Pool != b.o.Pool {
				continue
			}
			if hd.Status.Phase == hostpathv1.PhaseReady {
				ready++
			} else {
				other++
			}
		}
		return ready == n && other == 0, fmt.Sprintf("%d Ready, %d not", ready, other), nil
	})
}

// poll waits for cond, every 50ms, at most Timeout; the error says what
// was seen last.
func (b *bench) poll(ctx context.Context, what string, cond func(context.Context) (bool, string, error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, b.o.Timeout, true, func(ctx context.Context) (bool, error) {
		ok, seen, err := cond(ctx)
		last = seen
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s (last seen: %s): %w", what, last, err)
	}
	return nil
}

// namespace creates a namespace; done deletes it and waits until its
// claims' PVs are gone.
func (b *bench) namespace(ctx context.Context, prefix string) (string, func(), error) {
	nsObj, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, err
	}
	ns := nsObj.Name
	return ns, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.o.Timeout)
		defer cancel()
		t0 := time.Now()
		b.o.Logf.Printf("Deleting namespace %s, waiting at most %v for its PVs to be gone", ns, b.o.Timeout)
		if err := b.kube.CoreV1().Namespaces().Delete(dctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.o.Logf.Printf("Deleting namespace %s: %v", ns, err)
			return
		}
		if err := b.poll(dctx, "the PVs of namespace "+ns+" gone", func(ctx context.Context) (bool, string, error) {
			pvs, err := b.pvs.List(labels.Everything())
			if err != nil {
				return false, "", err
			}
			left := 0
			for _, pv := range pvs {
				if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
					left++
				}
			}
			return left == 0, fmt.Sprintf("%d PVs left", left), nil
		}); err != nil {
			b.o.Logf.Printf("%v", err)
			return
		}
		b.o.Logf.Printf("Namespace %s deleted, its PVs gone in %.1fs", ns, time.Since(t0).Seconds())
	}, nil
}

// claim is a 1Mi claim of class.
func claim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
}
