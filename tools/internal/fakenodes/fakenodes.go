// Package fakenodes keeps lightweight fake nodes in a cluster: Node objects
// with a Ready condition and capacity, whose Leases in kube-node-lease are
// renewed so the node lifecycle controller keeps them Ready, with no kubelet
// behind them. They are meant for scale benchmarks of the control-plane parts
// (scheduling, provisioning decisions); no pod ever runs on them.
package fakenodes

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"hostpath.dev/e2e/framework/localcluster"
)

// Fake nodes are labelled localcluster.FakeNodeLabel=true (Delete removes the
// nodes with it) and, unless Options.NoTaint, tainted NoSchedule with that key,
// so DaemonSets and ordinary pods stay off them.
const (
	// LeaseNamespace holds the node Leases.
	LeaseNamespace = "kube-node-lease"
	leaseDuration  = 40
)

// Options says which fake nodes to keep.
type Options struct {
	// Prefix starts every fake node's name; the names are Prefix1..PrefixCount.
	Prefix string
	// Count is the number of fake nodes.
	Count int
	// RenewInterval is how often every Lease is renewed.
	RenewInterval time.Duration
	// NoTaint leaves the nodes schedulable for every pod.
	NoTaint bool
	// Workers is the number of parallel API writers.
	Workers int
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch {
	case o.Prefix == "":
		return fmt.Errorf("prefix must not be empty")
	case o.Count < 1:
		return fmt.Errorf("count must be at least 1, got %d", o.Count)
	case o.RenewInterval <= 0 || o.RenewInterval >= leaseDuration*time.Second:
		return fmt.Errorf("renew interval must be between 0 and %ds, got %v", leaseDuration, o.RenewInterval)
	case o.Workers < 1:
		return fmt.Errorf("workers must be at least 1, got %d", o.Workers)
	}
	return nil
}

// Names returns the fake nodes' names.
func (o *Options) Names() []string {
	names := make([]string, o.Count)
	for i := range names {
		names[i] = o.Name(i + 1)
	}
	return names
}

// Name returns the name of fake node number i (from 1): Prefix<i>.
func (o *Options) Name(i int) string { return fmt.Sprintf("%s%d", o.Prefix, i) }

// Node is the object of a fake node named name.
func (o *Options) Node(name string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			localcluster.FakeNodeLabel: "true",
			corev1.LabelHostname:       name,
			corev1.LabelOSStable:       "linux",
			corev1.LabelArchStable:     "amd64",
			"node.kubernetes.io/fake":  "true",
		}},
	}
	if !o.NoTaint {
		n.Spec.Taints = []corev1.Taint{{Key: localcluster.FakeNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// Run creates the fake nodes (adopting existing ones), calls ready once every
// node is Ready with a fresh Lease, then renews the Leases every
// RenewInterval until ctx ends.
func Run(ctx context.Context, client kubernetes.Interface, o Options, ready func()) error {
	logger := klog.FromContext(ctx)
	names := o.Names()
	leases := make([]*coordinationv1.Lease, len(names))
	start := time.Now()
	// The fake kubelets say they are of the API server's version.
	server, err := client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("read the API server's version: %w", err)
	}
	kubelet := server.GitVersion + "-fake"
	if err := Parallel(ctx, o.Workers, len(names), func(ctx context.Context, i int) error {
		node, err := ensureNode(ctx, client, o.Node(names[i]), kubelet)
		if err != nil {
			return err
		}
		leases[i], err = ensureLease(ctx, client, node)
		return err
	}); err != nil {
		return err
	}
	logger.Info("Fake nodes ready", "count", len(names), "prefix", o.Prefix, "duration", time.Since(start).Round(time.Millisecond))
	if ready != nil {
		ready()
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) { renewAll(ctx, client, o.Workers, leases) }, o.RenewInterval)
	return nil
}

// renewAll renews every lease (workers at a time) and logs those that
// failed.
func renewAll(ctx context.Context, client kubernetes.Interface, workers int, leases []*coordinationv1.Lease) {
	logger := klog.FromContext(ctx)
	var failed atomic.Int64
	_ = Parallel(ctx, workers, len(leases), func(ctx context.Context, i int) error {
		l, err := renew(ctx, client, leases[i])
		if err != nil {
			failed.Add(1)
			logger.Error(err, "Renew lease", "lease", klog.KObj(leases[i]))
			return nil
		}
		leases[i] = l
		return nil
	})
	if n := failed.Load(); n > 0 {
		logger.Info("Some leases were not renewed", "failed", n, "total", len(leases))
	}
}

// Delete removes every node labelled localcluster.FakeNodeLabel=true (their
// Leases go with them: the Node owns them).
func Delete(ctx context.Context, client kubernetes.Interface, workers int) (int, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: localcluster.FakeNodeLabel + "=true"})
	if err != nil {
		return 0, fmt.Errorf("list fake nodes: %w", err)
	}
	err = Parallel(ctx, workers, len(list.Items), func(ctx context.Context, i int) error {
		err := client.CoreV1().Nodes().Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete node %s: %w", list.Items[i].Name, err)
		}
		err = client.CoordinationV1().Leases(LeaseNamespace).Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete lease %s: %w", list.Items[i].Name, err)
		}
		return nil
	})
	return len(list.Items), err
}

func ensureNode(ctx context.Context, client kubernetes.Interface, want *corev1.Node, kubeletVersion string) (*corev1.Node, error) {
	node, err := client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = client.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
		if err == nil && node.Labels[localcluster.FakeNodeLabel] != "true" {
			return nil, fmt.Errorf("node %s exists and is not a fake node", want.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", want.Name, err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("32Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	status := corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "FakeNodeReady",
			Message: "fake node (no kubelet): scripts/fake-nodes.sh", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node.Name}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: kubeletVersion, OperatingSystem: "linux", Architecture: "amd64",
			ContainerRuntimeVersion: "fake://0", MachineID: node.Name, SystemUUID: node.Name, BootID: "fake",
		},
	}
	// A merge patch: controllers change the Node right after it is created,
	// so an update would conflict.
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, fmt.Errorf("encode status of node %s: %w", want.Name, err)
	}
	node, err = client.CoreV1().Nodes().Patch(ctx, want.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("set status of node %s: %w", want.Name, err)
	}
	return node, nil
}

func ensureLease(ctx context.Context, client kubernetes.Interface, node *corev1.Node) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name, Namespace: LeaseNamespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(node.Name),
			LeaseDurationSeconds: ptr.To[int32](leaseDuration),
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	l, err := client.CoordinationV1().Leases(LeaseNamespace).Create(ctx, lease, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		l, err = client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, node.Name, metav1.GetOptions{})
		if err == nil {
			return renew(ctx, client, l)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create lease %s: %w", node.Name, err)
	}
	return l, nil
}

func renew(ctx context.Context, client kubernetes.Interface, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l = l.DeepCopy()
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	updated, err := client.CoordinationV1().Leases(LeaseNamespace).Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		fresh, gerr := client.CoordinationV1().Leases(LeaseNamespace).Get(ctx, l.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, fmt.Errorf("get lease %s: %w", l.Name, gerr)
		}
		fresh.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		updated, err = client.CoordinationV1().Leases(LeaseNamespace).Update(ctx, fresh, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("renew lease %s: %w", l.Name, err)
	}
	return updated, nil
}

// Parallel runs fn(0..n-1), at most workers at a time, and returns the first
// error; once one failed (or ctx ended) no new call starts. The benchmarks
// that write many objects of fake nodes use it too.
func Parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := 0; i < n && gctx.Err() == nil; i++ {
		g.Go(func() error { return fn(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
