package foreign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"

	"hostpath.dev/tools/internal/fleet"
)

// pollInterval is how often the waits look.
const pollInterval = time.Second

// setup creates the class and the claims' namespace, both labelled
// fleet.FleetLabel=true, and starts an informer of the namespace's claims;
// cleanup stops it and deletes the namespace and the class, if still there.
func (p *phase) setup(ctx context.Context) (cleanup func(), err error) {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: ClassName, Labels: map[string]string{fleet.FleetLabel: "true"}},
		Provisioner:       Provisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
	}
	if _, err := p.kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create StorageClass %s (one left by a killed run? scripts/bench-fleet.sh deletes it): %w", ClassName, err)
	}
	ns, err := p.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: NamespacePrefix, Labels: map[string]string{fleet.FleetLabel: "true"},
	}}, metav1.CreateOptions{})
	if err != nil {
		p.deleteClass(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create the claims' namespace: %w", err)
	}
	p.ns = ns.Name
	ictx, stop := context.WithCancel(context.WithoutCancel(ctx))
	factory := informers.NewSharedInformerFactoryWithOptions(p.kube, 0,
		informers.WithNamespace(p.ns), informers.WithTransform(metadataOnly))
	p.claims = factory.Core().V1().PersistentVolumeClaims().Lister()
	factory.Start(ictx.Done())
	cleanup = func() {
		stop()
		factory.Shutdown()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err := p.kube.CoreV1().Namespaces().Delete(cctx, p.ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			p.o.Logf.Printf("Deleting namespace %s: %v", p.ns, err)
		}
		p.deleteClass(cctx)
	}
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			cleanup()
			return nil, fmt.Errorf("cache of %v not synced", typ)
		}
	}
	return cleanup, nil
}

func (p *phase) deleteClass(ctx context.Context) {
	err := p.kube.StorageV1().StorageClasses().Delete(ctx, ClassName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		p.o.Logf.Printf("Deleting StorageClass %s: %v", ClassName, err)
	}
}

// metadataOnly keeps of a claim what the waits read, so that the cache of
// N claims stays small.
func metadataOnly(obj any) (any, error) {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return obj, nil
	}
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: c.Name, Namespace: c.Namespace, UID: c.UID, ResourceVersion: c.ResourceVersion,
		Annotations: c.Annotations, DeletionTimestamp: c.DeletionTimestamp,
	}}, nil
}

// start grows the fleet to K members, waits for their HostDefinitions,
// reads up and, Settle later, idle.
func (p *phase) start(ctx context.Context) error {
	t0 := time.Now()
	if err := p.fleet.Scale(ctx, p.o.Instances); err != nil {
		return fmt.Errorf("grow the fleet to %d: %w", p.o.Instances, err)
	}
	p.o.Logf.Printf("Fleet of %d nodes started in %.1fs", p.o.Instances, time.Since(t0).Seconds())
	if err := p.waitDefined(ctx); err != nil {
		return err
	}
	var err error
	if p.res.Up, err = p.read(ctx); err != nil {
		return err
	}
	p.res.Idle, err = p.settledRead(ctx, "idle")
	return err
}

// heartbeats updates the status of every fleet member's Node once (see
// heartbeat), Workers at a time, waits until the API server's watch events
// for Nodes have grown by at least one per update and then stayed the same
// over two polls, and records the updates and those events in NodeUpdates
// and NodeWatch. Without the API server's watch counters it updates
// nothing: NodeWatch stays nil.
func (p *phase) heartbeats(ctx context.Context) error {
	before, err := p.watchCounts(ctx, "nodes")
	if err != nil {
		p.o.Logf.Printf("The API server's watch counters not read, the Node status updates left out: %v", err)
		return nil
	}
	nodes := p.fleet.Nodes()
	now := time.Now()
	errs := make([]error, len(nodes))
	workqueue.ParallelizeUntil(ctx, p.o.Workers, len(nodes), func(i int) {
		errs[i] = heartbeat(ctx, p.kube, nodes[i], now)
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := firstError(errs); err != nil {
		return fmt.Errorf("update the status of the %d fleet Nodes: %w", len(nodes), err)
	}
	p.res.NodeUpdates = len(nodes)
	var last *WatchCounts
	err = p.poll(ctx, fmt.Sprintf("the API server's watch events for Nodes to follow %d Node status updates", len(nodes)), func(ctx context.Context) (bool, string, error) {
		w, err := p.watchCounts(ctx, "nodes")
		if err != nil {
			return false, "", err
		}
		grown := w.Sub(before)
		still := last != nil && *w == *last
		last = w
		return grown.Events >= float64(len(nodes)) && still, fmt.Sprintf("%.0f events since the updates", grown.Events), nil
	})
	if err != nil {
		return err
	}
	after, err := p.watchCounts(ctx, "nodes")
	if err != nil {
		p.o.Logf.Printf("The API server's watch counters not read after the Node status updates: %v", err)
	}
	p.res.NodeWatch = after.Sub(before)
	return nil
}

// heartbeat updates the status of node as a kubelet's status report does:
// a strategic merge patch of the status subresource that sets the Ready
// condition's lastHeartbeatTime to now. The conditions merge by type, so
// the rest of the Ready condition and of the status stays as it is.
func heartbeat(ctx context.Context, kube kubernetes.Interface, node string, now time.Time) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": corev1.NodeReady, "lastHeartbeatTime": metav1.NewTime(now),
	}}}})
	if err != nil {
		return fmt.Errorf("encode the status patch of Node %s: %w", node, err)
	}
	if _, err := kube.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("update the status of Node %s: %w", node, err)
	}
	return nil
}

// fill creates the N claims, waits until all are annotated, reads
// annotated and, Settle later, claims.
func (p *phase) fill(ctx context.Context) error {
	p.o.Logf.Printf("Creating %d claims of StorageClass %s (provisioner %s) in namespace %s", p.o.Claims, ClassName, Provisioner, p.ns)
	t0 := time.Now()
	if err := p.createClaims(ctx, p.ns, p.o.Claims, claim, t0); err != nil {
		return err
	}
	p.res.CreateSeconds = time.Since(t0).Seconds()
	p.o.Logf.Printf("%d claims created in %.1fs", p.o.Claims, p.res.CreateSeconds)
	err := p.poll(ctx, fmt.Sprintf("%d claims annotated with provisioner %s", p.o.Claims, Provisioner), func(context.Context) (bool, string, error) {
		n, err := p.count(func(c *corev1.PersistentVolumeClaim) bool { return c.Annotations[annStorageProvisioner] == Provisioner })
		return n == p.o.Claims, fmt.Sprintf("%d annotated", n), err
	})
	if err != nil {
		return err
	}
	p.res.AnnotateSeconds = time.Since(t0).Seconds()
	if p.res.Annotated, err = p.read(ctx); err != nil {
		return err
	}
	p.res.WithClaims, err = p.settledRead(ctx, "claims")
	return err
}

// empty deletes the namespace, waits until it and its claims are gone,
// deletes the class and reads deleted, Settle later.
func (p *phase) empty(ctx context.Context) error {
	t0 := time.Now()
	if err := p.kube.CoreV1().Namespaces().Delete(ctx, p.ns, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete namespace %s: %w", p.ns, err)
	}
	err := p.poll(ctx, fmt.Sprintf("namespace %s and its claims gone", p.ns), func(ctx context.Context) (bool, string, error) {
		n, err := p.count(nil)
		if err != nil {
			return false, "", err
		}
		_, err = p.kube.CoreV1().Namespaces().Get(ctx, p.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return n == 0, fmt.Sprintf("%d claims left, the namespace gone", n), nil
		}
		return false, fmt.Sprintf("%d claims left", n), err
	})
	if err != nil {
		return err
	}
	p.res.DeleteSeconds = time.Since(t0).Seconds()
	if err := p.kube.StorageV1().StorageClasses().Delete(ctx, ClassName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete StorageClass %s: %w", ClassName, err)
	}
	p.res.Deleted, err = p.settledRead(ctx, "deleted")
	return err
}

// createClaims creates the n claims newClaim(0) to newClaim(n-1) in namespace
// ns, chunk by chunk, Workers at a time.
func (p *phase) createClaims(ctx context.Context, ns string, n int, newClaim func(int) *corev1.PersistentVolumeClaim, t0 time.Time) error {
	pvcs := p.kube.CoreV1().PersistentVolumeClaims(ns)
	for from := 0; from < n; from += chunk {
		size := min(chunk, n-from)
		errs := make([]error, size)
		workqueue.ParallelizeUntil(ctx, p.o.Workers, size, func(i int) {
			_, errs[i] = pvcs.Create(ctx, newClaim(from+i), metav1.CreateOptions{})
		})
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := firstError(errs); err != nil {
			return fmt.Errorf("create claims %d to %d in namespace %s: %w", from, from+size-1, ns, err)
		}
		if done := from + size; done%(10*chunk) == 0 && done < n {
			p.o.Logf.Printf("%d of %d claims created in %.1fs", done, n, time.Since(t0).Seconds())
		}
	}
	return nil
}

// firstError says how many of errs are not nil, and wraps the first.
func firstError(errs []error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("%d of %d failed, the first: %w", n, len(errs), first)
}

// claim is claim number i of the class.
func claim(i int) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("foreign-%06d", i)},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(ClassName),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// count counts the cached claims of the namespace for which keep is true
// (every one for nil keep).
func (p *phase) count(keep func(*corev1.PersistentVolumeClaim) bool) (int, error) {
	claims, err := p.claims.List(labels.Everything())
	if err != nil {
		return 0, fmt.Errorf("list the cached claims: %w", err)
	}
	if keep == nil {
		return len(claims), nil
	}
	n := 0
	for _, c := range claims {
		if keep(c) {
			n++
		}
	}
	return n, nil
}

// waitDefined waits until every fleet node has a Ready HostDefinition of
// the pool.
func (p *phase) waitDefined(ctx context.Context) error {
	nodes := p.fleet.Nodes()
	return p.poll(ctx, fmt.Sprintf("a Ready HostDefinition of pool %s on each of the %d fleet nodes", p.o.Pool, len(nodes)), func(ctx context.Context) (bool, string, error) {
		list, err := p.hp.HostpathV1().HostDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("list HostDefinitions: %w", err)
		}
		n := readyOn(list.Items, p.o.Pool, nodes)
		return n == len(nodes), fmt.Sprintf("%d Ready", n), nil
	})
}

// readyOn counts the nodes that have a Ready HostDefinition of pool among
// defs.
func readyOn(defs []hostpathv1.HostDefinition, pool string, nodes []string) int {
	ready := map[string]bool{}
	for _, hd := range defs {
		if hd.Spec.Pool == pool && hd.DeletionTimestamp == nil && hd.Status.Phase == hostpathv1.PhaseReady && slices.Contains(nodes, hd.Spec.NodeName) {
			ready[hd.Spec.NodeName] = true
		}
	}
	return len(ready)
}

// poll waits for cond, every pollInterval, at most Timeout, with a
// progress line every 30 seconds. An error of cond is not the end (the API
// server may be slow to answer under the load): it is what was seen last,
// and the wait goes on.
func (p *phase) poll(ctx context.Context, what string, cond func(context.Context) (bool, string, error)) error {
	var last string
	t0, logged := time.Now(), time.Now()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, p.o.Timeout, true, func(ctx context.Context) (bool, error) {
		ok, seen, err := cond(ctx)
		last = seen
		if err != nil {
			last = err.Error()
		}
		if !ok && time.Since(logged) >= 30*time.Second {
			logged = time.Now()
			p.o.Logf.Printf("Waiting for %s: %s after %.0fs", what, last, time.Since(t0).Seconds())
		}
		return ok && err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s (last seen: %s): %w", what, last, err)
	}
	p.o.Logf.Printf("%s after %.1fs", what, time.Since(t0).Seconds())
	return nil
}

// settledRead waits Settle, then takes the named reading (see read).
func (p *phase) settledRead(ctx context.Context, reading string) (Reading, error) {
	if p.o.Settle > 0 {
		p.o.Logf.Printf("Settling %v before the %s reading", p.o.Settle, reading)
		select {
		case <-time.After(p.o.Settle):
		case <-ctx.Done():
			return Reading{}, ctx.Err()
		}
	}
	return p.read(ctx)
}

// read reads every fleet provisioner's usage (an error if one cannot be
// read: it exited), the real nodes' (a node whose provisioner process is
// not found once is left out, and logged) and the API server's watch
// counters of claims (nil, and logged, when they cannot be read).
func (p *phase) read(ctx context.Context) (Reading, error) {
	r := Reading{At: time.Now()}
	if p.fleet != nil {
		for _, m := range p.fleet.Members() {
			u, err := m.Provisioner.Usage()
			if err != nil {
				return r, fmt.Errorf("%s: %w", m.Node, err)
			}
			r.Fleet = append(r.Fleet, fleet.NodeUsage{Node: m.Node, Usage: u})
		}
	}
	r.Real = fleet.ReadNodes(fleet.ProvisionerProgram, p.res.RealNodes, p.o.Logf.Printf)
	var err error
	r.Watch, err = p.watchCounts(ctx, "persistentvolumeclaims")
	if err != nil {
		p.o.Logf.Printf("The API server's watch counters not read: %v", err)
	}
	return r, nil
}

// watchCounts reads the API server's watch counters of resource of the
// core API.
func (p *phase) watchCounts(ctx context.Context, resource string) (*WatchCounts, error) {
	raw, err := p.metrics(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	w, err := ParseWatchCounts(bytes.NewReader(raw), "", resource)
	if err != nil {
		return nil, fmt.Errorf("parse the API server's watch counters of %s: %w", resource, err)
	}
	return &w, nil
}
