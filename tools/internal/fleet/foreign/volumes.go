package foreign

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"

	"hostpath.dev/tools/internal/fleet"
)

const (
	// VolumesClass is the node-mode StorageClass of the hostpath volumes
	// step (Immediate, Delete), made and deleted by Run.
	VolumesClass = "hostpath-bench-fleet-volumes"
	// MultihostClass is its multihost StorageClass, made and deleted by
	// Run.
	MultihostClass = "hostpath-bench-fleet-multihost"
	// VolumesNamespacePrefix starts the name of each run's namespace.
	VolumesNamespacePrefix = "hostpath-bench-fleet-volumes-"
)

// VolumesRun is one run of the hostpath volumes step: its volumes made,
// Bound, deleted and gone with Instances fleet instances up.
type VolumesRun struct {
	// Instances is K, the fleet's provisioner instances (0: before the
	// fleet started); RealInstances the real nodes'.
	Instances     int `json:"instances"`
	RealInstances int `json:"realInstances"`
	// Node is the node-mode volumes, Multihost the multihost ones; nil
	// when not made.
	Node      *VolumeWatch `json:"node,omitempty"`
	Multihost *VolumeWatch `json:"multihost,omitempty"`
}

// VolumeWatch is the API server's watch events of claims and of
// PersistentVolumes, to all watchers, from before Volumes claims were
// created until they and their PVs were gone and the counters stayed the
// same.
type VolumeWatch struct {
	Volumes int         `json:"volumes"`
	Claims  WatchCounts `json:"claims"`
	PVs     WatchCounts `json:"pvs"`
	// BoundSeconds is from the first create until every claim was Bound,
	// GoneSeconds from their deletion until they and their PVs were gone.
	BoundSeconds float64 `json:"boundSeconds"`
	GoneSeconds  float64 `json:"goneSeconds"`
}

// PerVolume is the claims' and PVs' watch events and bytes together over
// Volumes; nil for no volume.
func (w *VolumeWatch) PerVolume() *WatchCounts {
	if w == nil || w.Volumes <= 0 {
		return nil
	}
	n := float64(w.Volumes)
	return &WatchCounts{Events: (w.Claims.Events + w.PVs.Events) / n, Bytes: (w.Claims.Bytes + w.PVs.Bytes) / n}
}

// volumeClass is the StorageClass name of the provisioner
// hostpath.dev/provisioner, Immediate, Delete, of mode (ModeNode or
// ModeMultihost) and pool, labelled fleet.FleetLabel=true.
func volumeClass(name, mode, pool string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name, Labels: map[string]string{fleet.FleetLabel: "true"}},
		Provisioner:       hostpathv1.DefaultProvisionerName,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		Parameters:        map[string]string{hostpathv1.ParamMode: mode, hostpathv1.ParamPool: pool},
	}
}

// volumeClaim is claim number i of the volumes step, of 1Mi: of
// VolumesClass, ReadWriteOnce and pinned to node when node is set; of
// MultihostClass and ReadWriteMany otherwise.
func volumeClaim(i int, node string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("multihost-%06d", i)},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(MultihostClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if node != "" {
		c.Name = fmt.Sprintf("node-%06d", i)
		c.Annotations = map[string]string{hostpathv1.AnnotationProvisionOnNode: node}
		c.Spec.StorageClassName = ptr.To(VolumesClass)
		c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return c
}

// volumeClasses are the classes the step needs, by name: their modes.
func (o *Options) volumeClasses() map[string]string {
	classes := map[string]string{}
	if o.Volumes > 0 {
		classes[VolumesClass] = hostpathv1.ModeNode
	}
	if o.MultihostVolumes > 0 {
		classes[MultihostClass] = hostpathv1.ModeMultihost
	}
	return classes
}

// classesListed reports whether data, that of the ConfigMap
// hostpathv1.ClassesConfigMap, has each of classes with its mode.
func classesListed(data map[string]string, classes map[string]string) bool {
	for name, mode := range classes {
		if data[hostpathv1.ClassKey(name)] != mode {
			return false
		}
	}
	return true
}

// makeVolumeClasses creates the step's classes and waits until the host
// definer has listed them in hostpathv1.ClassesConfigMap, so that the
// claim-labelling policy knows their modes from the first claim;
// cleanup deletes them, if still there. Nothing is made when the step
// is off.
func (p *phase) makeVolumeClasses(ctx context.Context) (cleanup func(), err error) {
	classes := p.o.volumeClasses()
	cleanup = func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for name := range classes {
			err := p.kube.StorageV1().StorageClasses().Delete(cctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				p.o.Logf.Printf("Deleting StorageClass %s: %v", name, err)
			}
		}
	}
	for name, mode := range classes {
		if _, err := p.kube.StorageV1().StorageClasses().Create(ctx, volumeClass(name, mode, p.o.Pool), metav1.CreateOptions{}); err != nil {
			cleanup()
			return nil, fmt.Errorf("create StorageClass %s (one left by a killed run? scripts/bench-fleet.sh deletes it): %w", name, err)
		}
	}
	if len(classes) == 0 {
		return cleanup, nil
	}
	ns := p.o.Fleet.Namespace
	err = p.poll(ctx, fmt.Sprintf("the classes %v listed in ConfigMap %s/%s", classes, ns, hostpathv1.ClassesConfigMap), func(ctx context.Context) (bool, string, error) {
		cm, err := p.kube.CoreV1().ConfigMaps(ns).Get(ctx, hostpathv1.ClassesConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, "", fmt.Errorf("get ConfigMap %s/%s: %w", ns, hostpathv1.ClassesConfigMap, err)
		}
		return classesListed(cm.Data, classes), "not yet", nil
	})
	if err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// volumesBefore is the volumes step with the real nodes' instances only.
func (p *phase) volumesBefore(ctx context.Context) error { return p.volumes(ctx, 0) }

// volumesUp is the volumes step with the fleet up.
func (p *phase) volumesUp(ctx context.Context) error {
	return p.volumes(ctx, len(p.fleetNodes()))
}

// volumes runs the hostpath volumes step with k fleet instances up, in a
// fresh namespace deleted at its end: Volumes node-mode claims, pinned to
// the real nodes in turn, then MultihostVolumes multihost claims, each
// part measured by measure; the run is appended to the Result's
// VolumeRuns. Without the API server's watch counters it makes nothing.
func (p *phase) volumes(ctx context.Context, k int) error {
	if p.o.Volumes == 0 && p.o.MultihostVolumes == 0 {
		return nil
	}
	if _, _, err := p.claimPVWatch(ctx); err != nil {
		p.o.Logf.Printf("The API server's watch counters not read, the hostpath volumes with %d fleet instances left out: %v", k, err)
		return nil
	}
	ns, err := p.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: VolumesNamespacePrefix, Labels: map[string]string{fleet.FleetLabel: "true"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the volumes' namespace: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := p.kube.CoreV1().Namespaces().Delete(cctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			p.o.Logf.Printf("Deleting namespace %s: %v", ns.Name, err)
		}
	}()
	real := p.res.RealNodes
	run := VolumesRun{Instances: k, RealInstances: len(real)}
	if p.o.Volumes > 0 {
		if len(real) == 0 {
			return fmt.Errorf("no real node to pin %d node-mode volumes to", p.o.Volumes)
		}
		pinned := func(i int) *corev1.PersistentVolumeClaim { return volumeClaim(i, real[i%len(real)]) }
		if run.Node, err = p.measure(ctx, ns.Name, p.o.Volumes, "node-mode", pinned); err != nil {
			return err
		}
	}
	if p.o.MultihostVolumes > 0 {
		shared := func(i int) *corev1.PersistentVolumeClaim { return volumeClaim(i, "") }
		if run.Multihost, err = p.measure(ctx, ns.Name, p.o.MultihostVolumes, "multihost", shared); err != nil {
			return err
		}
	}
	p.res.VolumeRuns = append(p.res.VolumeRuns, run)
	return nil
}

// measure creates n claims newClaim(0) to newClaim(n-1) in ns, waits until
// every one is Bound, deletes them and waits until they and their PVs are
// gone: the claims' and PVs' watch events from before the first create
// (the counters steady) until after (the counters steady again, so that
// late events count).
func (p *phase) measure(ctx context.Context, ns string, n int, mode string, newClaim func(int) *corev1.PersistentVolumeClaim) (*VolumeWatch, error) {
	claims0, pvs0, err := p.steadyWatch(ctx, "before the "+mode+" volumes")
	if err != nil {
		return nil, err
	}
	p.o.Logf.Printf("Creating %d %s claims in namespace %s", n, mode, ns)
	t0 := time.Now()
	if err := p.createClaims(ctx, ns, n, newClaim, t0); err != nil {
		return nil, err
	}
	pvs, err := p.bound(ctx, ns, n, mode)
	if err != nil {
		return nil, err
	}
	w := &VolumeWatch{Volumes: n, BoundSeconds: time.Since(t0).Seconds()}
	t1 := time.Now()
	if err := p.kube.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("delete the %s claims of namespace %s: %w", mode, ns, err)
	}
	if err := p.gone(ctx, ns, pvs, mode); err != nil {
		return nil, err
	}
	w.GoneSeconds = time.Since(t1).Seconds()
	claims1, pvs1, err := p.steadyWatch(ctx, "after the "+mode+" volumes")
	if err != nil {
		return nil, err
	}
	w.Claims, w.PVs = *claims1.Sub(claims0), *pvs1.Sub(pvs0)
	p.o.Logf.Printf("%d %s volumes with %d fleet instances: %.0f claim and %.0f PV watch events; Bound in %.1fs, gone in %.1fs",
		n, mode, len(p.fleetNodes()), w.Claims.Events, w.PVs.Events, w.BoundSeconds, w.GoneSeconds)
	return w, nil
}

// fleetNodes is the fleet's nodes, none before it exists.
func (p *phase) fleetNodes() []string {
	if p.fleet == nil {
		return nil
	}
	return p.fleet.Nodes()
}

// bound waits until the n claims of ns are Bound, and returns their PVs'
// names.
func (p *phase) bound(ctx context.Context, ns string, n int, mode string) (map[string]bool, error) {
	pvs := map[string]bool{}
	err := p.poll(ctx, fmt.Sprintf("%d %s claims Bound", n, mode), func(ctx context.Context) (bool, string, error) {
		list, err := p.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", fmt.Errorf("list the claims of namespace %s: %w", ns, err)
		}
		clear(pvs)
		for _, c := range list.Items {
			if c.Status.Phase == corev1.ClaimBound && c.Spec.VolumeName != "" {
				pvs[c.Spec.VolumeName] = true
			}
		}
		return len(pvs) == n, fmt.Sprintf("%d Bound", len(pvs)), nil
	})
	return pvs, err
}

// gone waits until ns has no claim left and none of pvs is left.
func (p *phase) gone(ctx context.Context, ns string, pvs map[string]bool, mode string) error {
	return p.poll(ctx, fmt.Sprintf("%d %s claims and their PVs gone", len(pvs), mode), func(ctx context.Context) (bool, string, error) {
		claims, err := p.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("list the claims of namespace %s: %w", ns, err)
		}
		list, err := p.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("list PersistentVolumes: %w", err)
		}
		left := 0
		for _, pv := range list.Items {
			if pvs[pv.Name] {
				left++
			}
		}
		return len(claims.Items) == 0 && left == 0, fmt.Sprintf("%d claims and %d PVs left", len(claims.Items), left), nil
	})
}

// steadyWatch waits until the API server's watch counters of claims and
// of PVs are the same over two polls, and returns them.
func (p *phase) steadyWatch(ctx context.Context, when string) (claims, pvs *WatchCounts, err error) {
	var last [2]*WatchCounts
	err = p.poll(ctx, "the claim and PV watch counters steady "+when, func(ctx context.Context) (bool, string, error) {
		c, v, err := p.claimPVWatch(ctx)
		if err != nil {
			return false, "", err
		}
		still := last[0] != nil && *c == *last[0] && *v == *last[1]
		last = [2]*WatchCounts{c, v}
		return still, fmt.Sprintf("%.0f claim and %.0f PV events", c.Events, v.Events), nil
	})
	if err != nil {
		return nil, nil, err
	}
	return last[0], last[1], nil
}

// claimPVWatch reads the API server's watch counters of claims and of
// PVs, from one reading of its metrics.
func (p *phase) claimPVWatch(ctx context.Context) (claims, pvs *WatchCounts, err error) {
	raw, err := p.metrics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	c, err := ParseWatchCounts(bytes.NewReader(raw), "", "persistentvolumeclaims")
	if err != nil {
		return nil, nil, fmt.Errorf("parse the API server's watch counters of claims: %w", err)
	}
	v, err := ParseWatchCounts(bytes.NewReader(raw), "", "persistentvolumes")
	if err != nil {
		return nil, nil, fmt.Errorf("parse the API server's watch counters of PVs: %w", err)
	}
	return &c, &v, nil
}
