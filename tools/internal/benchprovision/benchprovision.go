// Package benchprovision measures how fast a provisioner turns claims into
// volumes on a running cluster, and how fast it removes them: it creates
// many pinned claims at once in a fresh namespace, times the PVs, the binds
// and the per-claim latencies (create to PV, create to Bound) as its watches
// see them, counts the API server's requests by verb and resource
// (apiserver_request_total, before and after), then deletes the namespace
// and times until every PV and every volume directory is gone.
// scripts/bench-provision.sh runs it (tools/cmd/benchprovision) for the
// hostpath provisioner and for the no-op floor (tools/internal/noopprovisioner)
// at each kube-controller-manager setting, and prints the comparison
// (Report) and plots it (WritePlots).
package benchprovision

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/framework/localcluster"
)

const (
	// RunLabel is set on the benchmark's namespace, with Options.RunID as
	// value, so a script can find and delete what a killed run left.
	RunLabel = "hostpath.dev/bench-run"
)

// Options says what one benchmark run does.
type Options struct {
	// Label names the run in the results: KIND@SETTING, such as
	// ours@200/400 and noop@200/400 (see ParseLabel).
	Label string
	// Settings describes the provisioner configuration measured, for the table.
	Settings string
	// KCM describes kube-controller-manager's client limits during the run
	// ("200/400"), for the table.
	KCM string
	// RunID is the value of RunLabel on the namespace.
	RunID string
	// Round numbers the runs of one label (1, 2, ...) when the script
	// repeats them, alternating with the baseline's; 0 for a single run.
	Round int
	// Count is the number of claims.
	Count int
	// StorageClass is the claims' class; it must provision at once (Immediate).
	StorageClass string
	// Nodes the claims are spread over, round robin; empty: the real nodes
	// (localcluster.RealNodes: fake nodes run no provisioner).
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
	// APIMetrics, when set, returns the API server's /metrics (Prometheus
	// text); Run reads it before the first claim and after every PV and
	// directory is gone, and keeps the requests in between (APIRequests).
	APIMetrics func(ctx context.Context) ([]byte, error)
	// Logf prints progress; nil: none.
	Logf cli.Printf
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

// Result holds the figures of one run; times are in seconds.
type Result struct {
	Label     string   `json:"label"`
	Round     int      `json:"round,omitempty"`
	Settings  string   `json:"settings"`
	KCM       string   `json:"kcm,omitempty"`
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
	// LatencyP50Seconds, LatencyP95Seconds, LatencyMaxSeconds: from a
	// claim's create returning until its PV was seen (nearest rank).
	LatencyP50Seconds float64 `json:"latencyP50Seconds"`
	LatencyP95Seconds float64 `json:"latencyP95Seconds"`
	LatencyMaxSeconds float64 `json:"latencyMaxSeconds"`
	// BoundP50Seconds, BoundP95Seconds, BoundMaxSeconds: from a claim's
	// create returning until it was seen Bound (nearest rank).
	BoundP50Seconds float64 `json:"boundP50Seconds"`
	BoundP95Seconds float64 `json:"boundP95Seconds"`
	BoundMaxSeconds float64 `json:"boundMaxSeconds"`
	// PVTimes and BoundTimes are when each PV was seen and each claim was
	// seen Bound, from the first claim sent, ascending; BoundLatencies are
	// the claims' create->Bound latencies, ascending (milliseconds
	// resolution; for the plots).
	PVTimes        []float64 `json:"pvTimes"`
	BoundTimes     []float64 `json:"boundTimes"`
	BoundLatencies []float64 `json:"boundLatencies"`
	// Dirs is the number of volume directories found after provisioning
	// (0 when Options.NodesDir is empty).
	Dirs int `json:"dirs"`
	// PVsGoneSeconds: from the namespace delete until the last PV was gone.
	PVsGoneSeconds float64 `json:"pvsGoneSeconds"`
	// DirsGoneSeconds: from the namespace delete until no volume directory
	// was left (at Options.Poll resolution; 0 without NodesDir).
	DirsGoneSeconds float64 `json:"dirsGoneSeconds"`
	// ReleasedSeconds: from the namespace delete until the last PV was seen
	// Released (kube-controller-manager's part of the deletion).
	ReleasedSeconds float64 `json:"releasedSeconds,omitempty"`
	// GoneP50Seconds, GoneP95Seconds, GoneMaxSeconds: from a PV seen
	// Released until it was gone (the provisioner's part; nearest rank).
	GoneP50Seconds float64 `json:"goneP50Seconds,omitempty"`
	GoneP95Seconds float64 `json:"goneP95Seconds,omitempty"`
	GoneMaxSeconds float64 `json:"goneMaxSeconds,omitempty"`
	// ReleasedTimes and GoneTimes are when each PV was seen Released and
	// gone, from the namespace delete, ascending (for the plots).
	ReleasedTimes []float64 `json:"releasedTimes,omitempty"`
	GoneTimes     []float64 `json:"goneTimes,omitempty"`
	// DeletesPerSecond is Count / the larger of PVsGoneSeconds and DirsGoneSeconds.
	DeletesPerSecond float64 `json:"deletesPerSecond"`
	// APIRequests are the API server's requests, by every client, from
	// before the first claim until every PV and directory was gone, by verb
	// and resource (nil without Options.APIMetrics).
	APIRequests []apimetrics.RequestCount `json:"apiRequests,omitempty"`
	// WatchEvents are the watch events the API server sent in the same
	// time, by resource (verb "event"), summed over every watcher; nil
	// without Options.APIMetrics.
	WatchEvents []apimetrics.RequestCount `json:"watchEvents,omitempty"`
	// WatchEventsPerWatcher is the claim and PV watch events of the run
	// per watcher: what each instance of a cluster-wide claim and PV watch
	// (every provisioner instance) decodes.
	WatchEventsPerWatcher float64 `json:"watchEventsPerWatcher,omitempty"`
	// The peak RSS (VmHWM) and CPU time of the provisioner's processes and
	// of the managers', each summed over the instances (PROGRAM rows of
	// scripts/footprint.sh; see ApplyFootprint). Zero instances: not
	// measured.
	ProvisionerInstances  int     `json:"provisionerInstances,omitempty"`
	ProvisionerPeakMiB    float64 `json:"provisionerPeakMiB,omitempty"`
	ProvisionerCPUSeconds float64 `json:"provisionerCPUSeconds,omitempty"`
	ManagerInstances      int     `json:"managerInstances,omitempty"`
	ManagerPeakMiB        float64 `json:"managerPeakMiB,omitempty"`
	ManagerCPUSeconds     float64 `json:"managerCPUSeconds,omitempty"`
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

// HostDir is where the directory of pv (a hostPath or a local PV) is on
// this machine, given the pool's path on the nodes and the folder holding
// each node's files (NodesDir): the directory poolPath/X of node N is
// localcluster.NodeDir's mapping of localcluster.PoolPath/X.
func HostDir(pv *corev1.PersistentVolume, nodesDir, poolPath string) (string, error) {
	hostPath := hostpathv1.VolumePath(pv)
	if hostPath == "" {
		return "", fmt.Errorf("PV %s is neither a hostPath nor a local volume with a path", pv.Name)
	}
	rel, ok := strings.CutPrefix(filepath.Clean(hostPath), strings.TrimSuffix(poolPath, "/")+"/")
	if !ok || rel == "" || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("PV %s: path %q is not in pool %s", pv.Name, hostPath, poolPath)
	}
	dir, err := localcluster.NodeDir(nodesDir, pv.Annotations[hostpathv1.AnnotationNode], path.Join(localcluster.PoolPath, rel))
	if err != nil {
		return "", fmt.Errorf("PV %s, annotation %s: %w", pv.Name, hostpathv1.AnnotationNode, err)
	}
	return dir, nil
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// timeline is the durations in seconds at millisecond resolution, ascending.
func timeline(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = math.Round(d.Seconds()*1000) / 1000
	}
	sort.Float64s(out)
	return out
}

func perSecond(n int, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(n) / s
}

// claim is one benchmark claim pinned to node.
func claim(name, node, class string, size resource.Quantity) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{hostpathv1.AnnotationProvisionOnNode: node}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}
