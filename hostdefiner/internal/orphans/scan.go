package orphans

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/component"
)

// DefaultWorkers is how many nodes a Scanner lists at once when Workers is
// not set.
const DefaultWorkers = 8

// Scanner compares the managers' directories with the PersistentVolumes.
type Scanner struct {
	// Kube reads PersistentVolumes, StorageClasses and the manager pods.
	Kube kubernetes.Interface
	// Namespace holds the manager pods.
	Namespace string
	// Provisioner are the provisioner names of the PVs and StorageClasses
	// (the configured one and hostpathv1.CapacityProvisionerName).
	Provisioner hostpathv1.ProvisionerNames
	// ManagerSelector is the label selector of the manager pods.
	ManagerSelector string
	// ManagerPort is the managers' HTTPS port, called on the pod IP.
	ManagerPort int
	// Addresses are host:port addresses by node that replace the pod IP
	// and port (a port-forward, say); a node given one is listed whatever
	// its pods.
	Addresses map[string]string
	// Dial returns the manager of a node at an address.
	Dial Dial
	// Workers is how many nodes are listed at once (DefaultWorkers when
	// zero).
	Workers int
}

// target is a node to list: where its manager is, or why it has none.
type target struct {
	node, address string
	problem       error
}

// Scan lists the PVs, the managers' directories and the PVs again, and
// returns the report (without Token). An error is an API server failure:
// a manager that cannot be listed is a finding, not an error.
func (s *Scanner) Scan(ctx context.Context) (*Report, error) {
	before, err := s.volumes(ctx)
	if err != nil {
		return nil, err
	}
	pools, err := s.classPools(ctx)
	if err != nil {
		return nil, err
	}
	for i := range before {
		for loc := range references(&before[i], s.Provisioner) {
			pools.Insert(loc.pool)
		}
	}
	targets, err := s.targets(ctx, before)
	if err != nil {
		return nil, err
	}
	listings := s.listAll(ctx, targets, pools)
	after, err := s.volumes(ctx)
	if err != nil {
		return nil, err
	}
	r := &Report{Provisioner: s.Provisioner.String(), Namespace: s.Namespace, Findings: Classify(s.Provisioner, before, after, listings)}
	for _, l := range listings {
		n := NodeSummary{Node: l.Node, Address: l.Address}
		if l.Err != nil {
			n.Error = l.Err.Error()
		}
		n.Pools = slices.Sorted(maps.Keys(l.Pools))
		r.Nodes = append(r.Nodes, n)
	}
	r.count()
	return r, nil
}

// volumes lists every PersistentVolume.
func (s *Scanner) volumes(ctx context.Context) ([]corev1.PersistentVolume, error) {
	list, err := s.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	return list.Items, nil
}

// classPools returns the pools of the provisioner's StorageClasses.
func (s *Scanner) classPools(ctx context.Context) (sets.Set[string], error) {
	list, err := s.Kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list StorageClasses: %w", err)
	}
	pools := sets.New[string]()
	for _, sc := range list.Items {
		if !s.Provisioner.Has(sc.Provisioner) {
			continue
		}
		if pool := hostpathv1.ClassPool(sc.Parameters); managerapi.ValidatePoolName(pool) == nil {
			pools.Insert(pool)
		}
	}
	return pools, nil
}

// targets returns, sorted, the nodes to list: those of the manager pods,
// of the PVs and of the Addresses, each with the address of its manager
// (an Address, else a serving manager pod's IP and ManagerPort) or why it
// has none.
func (s *Scanner) targets(ctx context.Context, pvs []corev1.PersistentVolume) ([]target, error) {
	pods, err := s.Kube.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.ManagerSelector})
	if err != nil {
		return nil, fmt.Errorf("list the manager pods (%s in namespace %s): %w", s.ManagerSelector, s.Namespace, err)
	}
	address := map[string]string{}
	notReady := map[string][]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		node := p.Spec.NodeName
		switch {
		case node == "" || address[node] != "":
		case component.PodServing(p) && p.Status.PodIP != "":
			address[node] = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(s.ManagerPort))
		default:
			notReady[node] = append(notReady[node], p.Name)
		}
	}
	nodes := sets.KeySet(address).Union(sets.KeySet(notReady)).Union(sets.KeySet(s.Addresses))
	for i := range pvs {
		for loc := range references(&pvs[i], s.Provisioner) {
			nodes.Insert(loc.node)
		}
	}
	var out []target
	for _, node := range sets.List(nodes) {
		t := target{node: node, address: address[node]}
		if a, ok := s.Addresses[node]; ok {
			t.address = a
		}
		switch {
		case t.address != "":
		case len(notReady[node]) > 0:
			slices.Sort(notReady[node])
			t.problem = fmt.Errorf("no Ready manager pod on the node (not Ready: %s)", strings.Join(notReady[node], ", "))
		default:
			t.problem = fmt.Errorf("no manager pod on the node (%s in namespace %s)", s.ManagerSelector, s.Namespace)
		}
		out = append(out, t)
	}
	return out, nil
}

// listAll lists every target, Workers at once, and returns the listings in
// the order of targets.
func (s *Scanner) listAll(ctx context.Context, targets []target, pools sets.Set[string]) []NodeListing {
	workers := s.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	out := make([]NodeListing, len(targets))
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = s.list(ctx, t, pools)
		})
	}
	wg.Wait()
	return out
}

// list lists one target's pools: those given and those its manager's GET
// /v1/host names.
func (s *Scanner) list(ctx context.Context, t target, pools sets.Set[string]) NodeListing {
	l := NodeListing{Node: t.node, Address: t.address, Err: t.problem}
	if l.Err != nil {
		return l
	}
	m, err := s.Dial(t.node, t.address)
	if err != nil {
		l.Err = fmt.Errorf("manager at %s: %w", t.address, err)
		return l
	}
	host, err := m.Host(ctx)
	if err != nil {
		l.Err = fmt.Errorf("manager at %s: %w", t.address, err)
		return l
	}
	all := pools.Clone()
	for _, p := range host.Pools {
		all.Insert(p.Name)
	}
	l.Pools = map[string]PoolListing{}
	for _, pool := range sets.List(all) {
		list, err := m.ListVolumes(ctx, pool)
		switch {
		case err == nil:
			l.Pools[pool] = PoolListing{Volumes: list.Items}
		case managerapi.Classify(err) == managerapi.AnswerPoolMissing, managerapi.Classify(err) == managerapi.AnswerVolumeMissing:
			// A pool missing on the node (older managers answered
			// NotFound for it).
			l.Pools[pool] = PoolListing{NotFound: true}
		default:
			l.Pools[pool] = PoolListing{Err: fmt.Errorf("manager at %s: %w", t.address, err)}
		}
	}
	return l
}
