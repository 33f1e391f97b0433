package benchprovision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/e2e/framework/localcluster"
)

// Run does one benchmark run with client (whose rate limits must not be the
// bottleneck). Whatever happens, it deletes the namespace it created before
// returning (waiting at most Options.Timeout when the run failed).
func Run(ctx context.Context, client kubernetes.Interface, o Options) (res Result, err error) {
	if err := o.Validate(); err != nil {
		return res, err
	}
	b := &bench{client: client, o: o}
	if err := b.setUp(ctx); err != nil {
		return b.res, err
	}
	defer func() {
		if !b.nsDeleted {
			err = errors.Join(err, b.cleanUp(ctx))
		}
	}()
	b.t = newTracker(b.ns, time.Now)
	stop, err := b.t.watch(ctx, client, o.Timeout)
	defer stop()
	if err != nil {
		return b.res, err
	}
	for _, phase := range []func(context.Context) error{
		b.snapshotBefore, b.createClaims, b.waitPVs, b.waitBound, b.checkDirs, b.deleteAll, b.snapshotAfter, b.waitNamespaceGone,
	} {
		if err := phase(ctx); err != nil {
			return b.res, err
		}
	}
	return b.res, nil
}

// bench is one run in progress: what Run's phases hand to each other.
type bench struct {
	client kubernetes.Interface
	o      Options
	res    Result
	nodes  []string
	ns     string
	t      *tracker
	// nsDeleted is set once the namespace delete was sent (deleteAll).
	nsDeleted bool
	// start is when the first claim was sent.
	start time.Time
	// created and uids are, per claim, when its create returned and its UID.
	created []time.Time
	uids    []types.UID
	// pvs are the claims' PVs, in claim order; dirs their directories, by
	// the directory that holds them (a node's pool), by name.
	pvs  []*corev1.PersistentVolume
	dirs volumeDirs
	// requests is the API server's request counts before the first claim,
	// watch its watch events and watchers (ParseWatchEvents).
	requests, watch apimetrics.Requests
}

// setUp picks the nodes and creates the namespace.
func (b *bench) setUp(ctx context.Context) error {
	b.nodes = b.o.Nodes
	if len(b.nodes) == 0 {
		nodes, err := localcluster.RealNodes(ctx, b.client)
		if err != nil {
			return err
		}
		if len(nodes) == 0 {
			return errors.New("no real nodes")
		}
		b.nodes = nodes
	}
	b.res = Result{Label: b.o.Label, Round: b.o.Round, Settings: b.o.Settings, KCM: b.o.KCM, Count: b.o.Count, Nodes: b.nodes}

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hostpath-bench-"}}
	if b.o.RunID != "" {
		nsObj.Labels = map[string]string{RunLabel: b.o.RunID}
	}
	nsObj, err := b.client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	b.ns = nsObj.Name
	b.res.Namespace = b.ns
	over := strings.Join(b.nodes, ", ")
	if len(b.nodes) > 4 {
		over = fmt.Sprintf("%d nodes (%s ... %s)", len(b.nodes), b.nodes[0], b.nodes[len(b.nodes)-1])
	}
	b.o.Logf.Printf("%s: namespace %s, %d claims of class %s over %s", b.o.Label, b.ns, b.o.Count, b.o.StorageClass, over)
	return nil
}

// cleanUp deletes the namespace after a failure, also when ctx was
// cancelled.
func (b *bench) cleanUp(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := b.client.CoreV1().Namespaces().Delete(cctx, b.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", b.ns, err)
	}
	return nil
}

// createClaims creates every claim, Workers at a time, as fast as the client
// goes.
func (b *bench) createClaims(ctx context.Context) error {
	n := b.o.Count
	b.created, b.uids = make([]time.Time, n), make([]types.UID, n)
	errs := make([]error, n)
	b.start = time.Now()
	b.res.Started = b.start
	workqueue.ParallelizeUntil(ctx, b.o.Workers, n, func(i int) {
		pvc := claim(fmt.Sprintf("bench-%05d", i), b.nodes[i%len(b.nodes)], b.o.StorageClass, b.o.Size)
		got, err := b.client.CoreV1().PersistentVolumeClaims(b.ns).Create(ctx, pvc, metav1.CreateOptions{})
		b.created[i] = time.Now()
		if err != nil {
			errs[i] = fmt.Errorf("create claim %s: %w", pvc.Name, err)
			return
		}
		b.uids[i] = got.UID
	})
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return err
	}
	b.res.CreateSeconds = seconds(time.Since(b.start))
	b.o.Logf.Printf("%s: %d claims created in %.2fs", b.o.Label, n, b.res.CreateSeconds)
	return nil
}

// countOf is how many of the claims m has; call it with b.t.mu held.
func (b *bench) countOf(m map[types.UID]time.Time) int {
	n := 0
	for _, uid := range b.uids {
		if _, ok := m[uid]; ok {
			n++
		}
	}
	return n
}

// lastOf is the latest time m has for a claim; call it with b.t.mu held.
func (b *bench) lastOf(m map[types.UID]time.Time) time.Time {
	var last time.Time
	for _, uid := range b.uids {
		if m[uid].After(last) {
			last = m[uid]
		}
	}
	return last
}

// waitEvery waits until m, a map of the tracker, has every claim, and
// returns the latest time in it.
func (b *bench) waitEvery(ctx context.Context, what, noun string, m map[types.UID]time.Time) (time.Time, error) {
	n := b.o.Count
	if err := b.t.waitFor(ctx, b.o.Timeout, b.o.Poll, what, func() (bool, string) {
		has := b.countOf(m)
		return has == n, fmt.Sprintf("%d of %d %s", has, n, noun)
	}); err != nil {
		return time.Time{}, err
	}
	var last time.Time
	b.t.locked(func() { last = b.lastOf(m) })
	return last, nil
}

// waitPVs waits until every claim has a PV and records when, when each
// appeared, and the latencies from each create to its PV.
func (b *bench) waitPVs(ctx context.Context) error {
	last, err := b.waitEvery(ctx, "every PV", "PVs", b.t.pvSeen)
	if err != nil {
		return err
	}
	n := b.o.Count
	b.res.AllPVsSeconds = seconds(last.Sub(b.start))
	latencies, times := make([]time.Duration, n), make([]time.Duration, n)
	b.t.locked(func() {
		b.pvs = make([]*corev1.PersistentVolume, 0, n)
		for i, uid := range b.uids {
			latencies[i] = max(b.t.pvSeen[uid].Sub(b.created[i]), 0)
			times[i] = b.t.pvSeen[uid].Sub(b.start)
			b.pvs = append(b.pvs, b.t.pvs[uid])
		}
	})
	b.res.PVsPerSecond = perSecond(n, b.res.AllPVsSeconds)
	b.res.LatencyP50Seconds = seconds(Percentile(latencies, 50))
	b.res.LatencyP95Seconds = seconds(Percentile(latencies, 95))
	b.res.LatencyMaxSeconds = seconds(Percentile(latencies, 100))
	b.res.PVTimes = timeline(times)
	b.o.Logf.Printf("%s: all %d PVs after %.2fs", b.o.Label, n, b.res.AllPVsSeconds)
	return nil
}

// waitBound waits until every claim is Bound and records when, when each
// was, and the latencies from each create to Bound.
func (b *bench) waitBound(ctx context.Context) error {
	last, err := b.waitEvery(ctx, "every claim Bound", "Bound", b.t.bound)
	if err != nil {
		return err
	}
	n := b.o.Count
	b.res.AllBoundSeconds = seconds(last.Sub(b.start))
	b.res.BindsPerSecond = perSecond(n, b.res.AllBoundSeconds)
	latencies, times := make([]time.Duration, n), make([]time.Duration, n)
	b.t.locked(func() {
		for i, uid := range b.uids {
			latencies[i] = max(b.t.bound[uid].Sub(b.created[i]), 0)
			times[i] = b.t.bound[uid].Sub(b.start)
		}
	})
	b.res.BoundLatencies = timeline(latencies)
	b.res.BoundTimes = timeline(times)
	b.res.BoundP50Seconds = seconds(Percentile(latencies, 50))
	b.res.BoundP95Seconds = seconds(Percentile(latencies, 95))
	b.res.BoundMaxSeconds = seconds(Percentile(latencies, 100))
	b.o.Logf.Printf("%s: all %d claims Bound after %.2fs", b.o.Label, n, b.res.AllBoundSeconds)
	return nil
}

// snapshotBefore reads the API server's request counts, with
// Options.APIMetrics.
func (b *bench) snapshotBefore(ctx context.Context) error {
	if b.o.APIMetrics == nil {
		return nil
	}
	var err error
	b.requests, b.watch, err = b.apiRequests(ctx)
	return err
}

// snapshotAfter reads the request counts again and keeps the requests since
// snapshotBefore in the result.
func (b *bench) snapshotAfter(ctx context.Context) error {
	if b.o.APIMetrics == nil {
		return nil
	}
	after, watch, err := b.apiRequests(ctx)
	if err != nil {
		return err
	}
	b.res.APIRequests = after.Since(b.requests)
	b.res.WatchEvents, b.res.WatchEventsPerWatcher = watchEventsSince(watch, b.watch)
	b.o.Logf.Printf("%s: %d API requests during the run; %.0f claim and PV watch events per watcher", b.o.Label, apimetrics.Total(b.res.APIRequests), b.res.WatchEventsPerWatcher)
	return nil
}

// apiRequests reads the API server's request counts, and its watch events
// and watchers (ParseWatchEvents).
func (b *bench) apiRequests(ctx context.Context) (apimetrics.Requests, apimetrics.Requests, error) {
	text, err := b.o.APIMetrics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	requests, err := apimetrics.ParseAPIRequests(bytes.NewReader(text))
	if err != nil {
		return nil, nil, err
	}
	watch, err := apimetrics.ParseWatchEvents(text)
	return requests, watch, err
}

// watchedResources are the resources whose watch events a run counts per
// watcher: every claim and PV event goes to every watcher of its kind.
var watchedResources = []string{"persistentvolumeclaims", "persistentvolumes"}

// watchEventsSince returns the watch events sent from before to after (two
// reads of ParseWatchEvents), by resource, and the events of
// watchedResources per watcher: each resource's events divided by its
// watchers at the end, summed.
func watchEventsSince(after, before apimetrics.Requests) ([]apimetrics.RequestCount, float64) {
	events := apimetrics.Requests{}
	for k, n := range after {
		if k.Verb == "event" {
			events[k] = n
		}
	}
	since := events.Since(before)
	var perWatcher float64
	for _, c := range since {
		w := after[apimetrics.RequestKey{Verb: "watchers", Resource: c.Resource}]
		if w > 0 && slices.Contains(watchedResources, c.Resource) {
			perWatcher += float64(c.Count) / float64(w)
		}
	}
	return since, perWatcher
}

// checkDirs checks, with Options.NodesDir, that every PV's directory exists.
func (b *bench) checkDirs(context.Context) error {
	if b.o.NodesDir == "" {
		return nil
	}
	b.dirs = volumeDirs{}
	for _, pv := range b.pvs {
		dir, err := HostDir(pv, b.o.NodesDir, b.o.PoolPath)
		if err != nil {
			return err
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("PV %s is there but its directory %s is not: %v", pv.Name, dir, err)
		}
		b.dirs.add(dir)
	}
	b.res.Dirs = b.dirs.count()
	return nil
}

// volumeDirs are directories by the directory that holds them, by name.
type volumeDirs map[string]map[string]bool

func (v volumeDirs) add(dir string) {
	parent, name := filepath.Split(filepath.Clean(dir))
	if v[parent] == nil {
		v[parent] = map[string]bool{}
	}
	v[parent][name] = true
}

func (v volumeDirs) count() int {
	n := 0
	for _, names := range v {
		n += len(names)
	}
	return n
}

// left is how many of the directories still exist (as anything: a file in
// a directory's place counts), from one listing of each directory that
// holds them, not one lstat each: the deletion's wait calls it every
// Options.Poll, and 1,000 lstats at a time made the benchmark use 7.6 CPU-s
// in a deletion of 1,000 volumes, 3.2 with the listings (the floor's side,
// which has no directories to wait for, 2.6-2.9), on the CPUs of the API
// server whose work it times. A holder that cannot be read counts all its
// directories as left; one that is gone, none.
func (v volumeDirs) left() int {
	n := 0
	for parent, names := range v {
		f, err := os.Open(parent)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var present []string
		if err == nil {
			present, err = f.Readdirnames(-1)
			f.Close()
		}
		if err != nil {
			n += len(names)
			continue
		}
		for _, p := range present {
			if names[p] {
				n++
			}
		}
	}
	return n
}

// deleteAll deletes the namespace and times until every PV and directory is
// gone.
func (b *bench) deleteAll(ctx context.Context) error {
	delStart := time.Now()
	if err := b.client.CoreV1().Namespaces().Delete(ctx, b.ns, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete namespace %s: %w", b.ns, err)
	}
	b.nsDeleted = true
	var dirsGone time.Time
	if err := b.t.waitFor(ctx, b.o.Timeout, b.o.Poll, "every PV and directory gone", func() (bool, string) {
		gone := 0
		for _, pv := range b.pvs {
			if _, ok := b.t.pvGone[pv.Name]; ok {
				gone++
			}
		}
		left := 0
		if dirsGone.IsZero() {
			if left = b.dirs.left(); left == 0 {
				dirsGone = time.Now()
			}
		}
		return gone == len(b.pvs) && left == 0, fmt.Sprintf("%d of %d PVs gone, %d directories left", gone, len(b.pvs), left)
	}); err != nil {
		return err
	}
	var lastGone, lastReleased time.Time
	var released, gone, latencies []time.Duration
	b.t.locked(func() {
		for _, pv := range b.pvs {
			g, r := b.t.pvGone[pv.Name], b.t.released[pv.Name]
			lastGone, lastReleased = maxTime(lastGone, g), maxTime(lastReleased, r)
			gone, released = append(gone, g.Sub(delStart)), append(released, r.Sub(delStart))
			latencies = append(latencies, g.Sub(r))
		}
	})
	b.res.PVsGoneSeconds = seconds(lastGone.Sub(delStart))
	b.res.ReleasedSeconds = seconds(lastReleased.Sub(delStart))
	b.res.GoneTimes, b.res.ReleasedTimes = timeline(gone), timeline(released)
	b.res.GoneP50Seconds = seconds(Percentile(latencies, 50))
	b.res.GoneP95Seconds = seconds(Percentile(latencies, 95))
	b.res.GoneMaxSeconds = seconds(Percentile(latencies, 100))
	if len(b.dirs) > 0 {
		b.res.DirsGoneSeconds = seconds(dirsGone.Sub(delStart))
	}
	b.res.DeletesPerSecond = perSecond(b.o.Count, max(b.res.PVsGoneSeconds, b.res.DirsGoneSeconds))
	b.o.Logf.Printf("%s: all PVs gone after %.2fs, all directories after %.2fs", b.o.Label, b.res.PVsGoneSeconds, b.res.DirsGoneSeconds)
	return nil
}

// waitNamespaceGone waits, untimed, until the namespace itself is gone, so
// that the next run starts clean.
func (b *bench) waitNamespaceGone(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, b.o.Poll, b.o.Timeout, true, func(ctx context.Context) (bool, error) {
		_, err := b.client.CoreV1().Namespaces().Get(ctx, b.ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone after %v", b.ns, b.o.Timeout)
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
