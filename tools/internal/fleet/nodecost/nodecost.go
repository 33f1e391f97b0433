// Package nodecost measures what the nodes of a large cluster cost each
// provisioner instance, at numbers of nodes that a fleet of processes
// (package fleet: a manager and a provisioner process per fake node) cannot
// reach on one machine. Of each other node an instance caches only what
// the API server sends it: the node's provisioner pod and manager pod (for
// the election and the multihost fan-out) and its HostDefinition of each
// pool. So the memory of many nodes can be measured without their
// processes: Run writes those objects for fake nodes, in steps up to
// thousands, and reads the real nodes' provisioners' resident memory
// (VmRSS and its anonymous part, RssAnon) before and after each step.
//
// Each fake node is what fakenodes.Options.Node makes (tainted, no kubelet,
// never Ready, so that kube-controller-manager's node lifecycle leaves its
// pods alone) with:
//
//   - the fleet's two pod objects on it (fleet.Pod, controlled by the
//     fleet's owner ConfigMap, so that the DaemonSets neither adopt nor
//     delete them), their status Running and Ready (fleet.ReadyStatus) at
//     an address of 198.18.128.0/18 that nothing serves;
//   - a HostDefinition of the pool, a copy of a real node's (its spec and
//     status, with the fake node's name and manager pod), labelled
//     fleet.FleetLabel=true.
//
// The host definer must not run meanwhile (scripts/bench-fleet.sh scales it
// to zero): it would undefine the copies, whose managers do not answer.
// Nothing is made that an instance would act on (no claim, no PV), so what
// grows is the caches and what the Go runtime keeps for them. Everything
// Run made is deleted at the end, also on failure. Report prints a Result.
package nodecost

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"
	hostpathv1 "hostpath.dev/api/hostpath/v1"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/framework/localcluster"
	"hostpath.dev/tools/internal/fakenodes"
	"hostpath.dev/tools/internal/fleet"
)

// addresses is where the fake nodes' pods say they serve: in the local
// cluster's pod range (198.18.0.0/16, scripts/cluster-lib.sh), apart from
// the real nodes' 198.18.N.0/24 and the fleet's 198.18.250.0/24, on no
// device.
var addresses = netip.MustParsePrefix("198.18.128.0/18")

// Options say what to measure.
type Options struct {
	// Namespace is the product's namespace.
	Namespace string
	// Prefix starts the fake nodes' names (Prefix1, Prefix2, ...).
	Prefix string
	// Steps are the numbers of fake nodes after each step, increasing.
	Steps []int
	// Settle is the time between two readings after a step, Readings
	// their number (the first is Settle after the step's objects were
	// written).
	Settle   time.Duration
	Readings int
	// Pool is the pool whose HostDefinition every fake node gets.
	Pool string
	// Workers is how many fake nodes are written at once.
	Workers int
	// Logf prints progress.
	Logf cli.Printf
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch {
	case o.Namespace == "" || o.Prefix == "" || o.Pool == "":
		return errors.New("the namespace, the prefix and the pool must not be empty")
	case len(o.Steps) == 0:
		return errors.New("no step")
	case o.Settle < 0 || o.Readings < 1 || o.Workers < 1:
		return errors.New("the settle time must not be negative, the readings and the workers must be at least 1")
	}
	for i, n := range o.Steps {
		if n < 1 || n >= 1<<(32-addresses.Bits()) || (i > 0 && n <= o.Steps[i-1]) {
			return fmt.Errorf("the steps must increase from 1 to %d, not %v", 1<<(32-addresses.Bits())-1, o.Steps)
		}
	}
	return nil
}

// Result is what Run measured.
type Result struct {
	// Date is when the run started; Pool and SettleSeconds are what it
	// measured with; RealNodes are the nodes with a kubelet.
	Date          time.Time `json:"date"`
	Pool          string    `json:"pool"`
	SettleSeconds float64   `json:"settleSeconds"`
	RealNodes     []string  `json:"realNodes"`
	// Before is the real nodes' provisioners before the first step.
	Before []fleet.NodeUsage `json:"before"`
	// Steps are the steps, in order.
	Steps []Step `json:"steps"`
}

// Step is one step: the fake nodes in all after it, how long writing its
// objects took, and the readings after it.
type Step struct {
	Nodes        int       `json:"nodes"`
	WriteSeconds float64   `json:"writeSeconds"`
	Readings     []Reading `json:"readings"`
}

// Reading is the real nodes' provisioners at one time, AfterSeconds after
// the step's objects were written.
type Reading struct {
	AfterSeconds float64           `json:"afterSeconds"`
	Real         []fleet.NodeUsage `json:"real"`
}

// Run measures. kube must not be rate limited (the benchmark's own
// client); hp writes the HostDefinitions.
func Run(ctx context.Context, kube kubernetes.Interface, hp hostpathclient.Interface, o Options) (res Result, err error) {
	if err := o.Validate(); err != nil {
		return res, err
	}
	real, err := localcluster.RealNodes(ctx, kube)
	if err != nil {
		return res, err
	}
	if len(real) == 0 {
		return res, errors.New("no real node")
	}
	res = Result{Date: time.Now().UTC(), Pool: o.Pool, SettleSeconds: o.Settle.Seconds(), RealNodes: real}
	template, err := hp.HostpathV1().HostDefinitions().Get(ctx, hostpathv1.Name(real[0], o.Pool), metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("the HostDefinition of pool %s on %s, to copy: %w", o.Pool, real[0], err)
	}
	if res.Before = fleet.ReadNodes(fleet.ProvisionerProgram, real, o.Logf.Printf); len(res.Before) != len(real) {
		return res, fmt.Errorf("read the %s process of %d of the %d real nodes %v (is hostpath deployed and running?)",
			fleet.ProvisionerProgram, len(res.Before), len(real), real)
	}
	own, err := kube.CoreV1().ConfigMaps(o.Namespace).Create(ctx, fleet.Owner(o.Namespace), metav1.CreateOptions{})
	if err != nil {
		return res, fmt.Errorf("create the owner ConfigMap: %w", err)
	}
	w := &writer{kube: kube, hp: hp, o: o, own: own, template: template}
	defer func() { err = errors.Join(err, w.deleteAll()) }()
	made := 0
	for _, n := range o.Steps {
		t0 := time.Now()
		if err := w.write(ctx, made, n); err != nil {
			return res, err
		}
		made = n
		step := Step{Nodes: n, WriteSeconds: time.Since(t0).Seconds()}
		o.Logf.Printf("%d fake nodes written in %.1fs; reading the real nodes' provisioners every %v, %d times", n, step.WriteSeconds, o.Settle, o.Readings)
		written := time.Now()
		for range o.Readings {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(o.Settle):
			}
			r := Reading{AfterSeconds: time.Since(written).Seconds(), Real: fleet.ReadNodes(fleet.ProvisionerProgram, real, o.Logf.Printf)}
			step.Readings = append(step.Readings, r)
			o.Logf.Printf("%d nodes, %.0fs after: %s", n, r.AfterSeconds, usageText(r.Real))
		}
		res.Steps = append(res.Steps, step)
	}
	return res, nil
}

// writer writes and deletes the fake nodes' objects.
type writer struct {
	kube     kubernetes.Interface
	hp       hostpathclient.Interface
	o        Options
	own      *corev1.ConfigMap
	template *hostpathv1.HostDefinition
}

// write makes the fake nodes from+1 to to, Workers at a time.
func (w *writer) write(ctx context.Context, from, to int) error {
	nodes := fakenodes.Options{Prefix: w.o.Prefix}
	return fakenodes.Parallel(ctx, w.o.Workers, to-from, func(ctx context.Context, k int) error {
		i := from + 1 + k
		name := nodes.Name(i)
		if _, err := w.kube.CoreV1().Nodes().Create(ctx, nodes.Node(name), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		if _, err := w.pod(ctx, fleet.RoleProvisioner, name, address(i), i); err != nil {
			return err
		}
		manager, err := w.pod(ctx, fleet.RoleManager, name, address(i), i)
		if err != nil {
			return err
		}
		return w.definition(ctx, name, manager)
	})
}

// pod creates role's pod on node and sets it Running and Ready at ip.
func (w *writer) pod(ctx context.Context, r fleet.Role, node, ip string, i int) (*corev1.Pod, error) {
	pods := w.kube.CoreV1().Pods(w.o.Namespace)
	p, err := pods.Create(ctx, fleet.Pod(r, node, w.o.Namespace, w.own), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: create the %s pod: %w", node, r, err)
	}
	p.Status = fleet.ReadyStatus(r, ip, i, time.Now())
	if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("%s: set the %s pod Ready: %w", node, r, err)
	}
	return p, nil
}

// definition creates the HostDefinition of the pool on node, a copy of the
// template's spec and status naming node and its manager pod.
func (w *writer) definition(ctx context.Context, node string, manager *corev1.Pod) error {
	defs := w.hp.HostpathV1().HostDefinitions()
	want := Definition(w.template, node, manager)
	d, err := defs.Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: create the HostDefinition: %w", node, err)
	}
	d.Status = want.Status
	if _, err := defs.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("%s: set the HostDefinition's status: %w", node, err)
	}
	return nil
}

// Definition returns the HostDefinition of template's pool on node whose
// manager pod is manager: template's spec and status, renamed, labelled
// fleet.FleetLabel=true.
func Definition(template *hostpathv1.HostDefinition, node string, manager *corev1.Pod) *hostpathv1.HostDefinition {
	d := &hostpathv1.HostDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   hostpathv1.Name(node, template.Spec.Pool),
			Labels: map[string]string{fleet.FleetLabel: "true"},
		},
		Spec:   *template.Spec.DeepCopy(),
		Status: *template.Status.DeepCopy(),
	}
	d.Spec.NodeName = node
	d.Status.ManagerPod, d.Status.ManagerPodUID = manager.Name, manager.UID
	return d
}

// address returns the i-th address of addresses (i below its size).
func address(i int) string {
	a := addresses.Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) + uint32(i)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a).String()
}

// deleteAll deletes what Run made: the HostDefinitions, the pods (at once:
// no kubelet would confirm a graceful deletion), the owner ConfigMap, the
// fake nodes. One request per object, Workers at a time: a DeleteCollection
// of thousands of pods outlasts the API server's request timeout.
func (w *writer) deleteAll() error {
	// The run's context may be cancelled by now.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w.o.Logf.Printf("Deleting the fake nodes' objects")
	fleetObjects := metav1.ListOptions{LabelSelector: fleet.FleetLabel + "=true"}
	var errs []error
	defs := w.hp.HostpathV1().HostDefinitions()
	if list, err := defs.List(ctx, fleetObjects); err != nil {
		errs = append(errs, fmt.Errorf("list the HostDefinitions: %w", err))
	} else {
		errs = append(errs, w.deleteEach(ctx, len(list.Items), func(ctx context.Context, i int) error {
			return defs.Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{})
		}))
	}
	pods := w.kube.CoreV1().Pods(w.o.Namespace)
	if list, err := pods.List(ctx, fleetObjects); err != nil {
		errs = append(errs, fmt.Errorf("list the pods: %w", err))
	} else {
		errs = append(errs, w.deleteEach(ctx, len(list.Items), func(ctx context.Context, i int) error {
			return pods.Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}))
	}
	if err := w.kube.CoreV1().ConfigMaps(w.o.Namespace).Delete(ctx, w.own.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	_, err := fakenodes.Delete(ctx, w.kube, w.o.Workers)
	return errors.Join(append(errs, err)...)
}

// deleteEach calls del(0..n-1), Workers at a time (fakenodes.Parallel); an
// object already gone is no error.
func (w *writer) deleteEach(ctx context.Context, n int, del func(ctx context.Context, i int) error) error {
	return fakenodes.Parallel(ctx, w.o.Workers, n, func(ctx context.Context, i int) error {
		if err := del(ctx, i); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}
