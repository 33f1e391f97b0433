// Package fleet runs many hostpath nodes on this machine for scale
// benchmarks: each member is a fake node (package fakenodes: a Node object
// kept Ready, no kubelet) with one manager and one provisioner process of
// its own, started from the product's binaries, so the real leaderless cost
// of many instances shows (watch traffic, peer-pod lists, rendezvous
// hashing, manager discovery, the host definer's verifications).
//
// The processes must be seen by ownership and discovery as on a real
// cluster, so every member gets what the DaemonSets would give it:
//
//   - a pod object per process on its node, with the labels the product's
//     selectors use and its service account, controlled by the ConfigMap
//     OwnerName (so the DaemonSets do not adopt and delete them), whose
//     status the fleet sets Running and Ready, with the member's address as
//     pod IP, once the process answers /readyz;
//   - service account tokens bound to that pod (TokenRequest with a
//     BoundObjectRef, as projected volumes are), in files: one for the API
//     server (in a kubeconfig's tokenFile) and, for the provisioner, one of
//     audience hostpath.dev/manager. The manager's CSR is then approved by
//     the host definer as any manager pod's is, and its calls are
//     authorised by RBAC as the DaemonSet's are;
//   - an address of its own, ADDRESS_PREFIX+N (in 198.18.0.0/15, on the
//     local cluster's API bridge, like the real nodes' kubelet addresses),
//     reachable from the pods on the real nodes;
//   - for the manager, a private mount namespace (unshare) in which the
//     member's folders under Dir are bind-mounted on the pool paths
//     /var/hpvolumes and /var/hppools, as on a real node: multihost volumes
//     need one pool path on every node.
//
// Everything it made is undone by Close: the processes stopped by PID, the
// owner ConfigMap and the pods deleted, the fake nodes deleted, the
// addresses removed.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework/localcluster"
	"hostpath.dev/tools/internal/fakenodes"
)

// Ports every member's processes serve on, at its own address.
const (
	ManagerPort        = managerapi.ServingPort
	ManagerHealthPort  = managerapi.HealthPort
	ProvisionerMetrics = 8082
)

// MaxMembers is the most members a fleet has: one address each in the
// last byte of AddressPrefix.
const MaxMembers = 250

// Options say how the fleet's members are made.
type Options struct {
	// Namespace is the product's namespace (the DaemonSets', the service
	// accounts').
	Namespace string
	// Prefix starts the fake nodes' names: Prefix1, Prefix2, ...
	Prefix string
	// Dir keeps every member's folders, tokens, kubeconfigs and logs:
	// Dir/NODE/{hpvolumes,hppools,state,...}.
	Dir string
	// ManagerBin and ProvisionerBin are the product's binaries.
	ManagerBin, ProvisionerBin string
	// ProvisionerArgs come first on each provisioner's command line (the
	// DaemonSet's arguments); the fleet's own follow and win.
	ProvisionerArgs []string
	// AddressPrefix is the first three bytes of the members' addresses,
	// with the dot: member N has AddressPrefix+N.
	AddressPrefix string
	// Device gets the members' addresses (ip addr add ADDRESS/32 dev).
	Device string
	// Server and CAData are how the processes reach the API server.
	Server string
	CAData []byte
	// ReadyTimeout bounds the wait for a new member's processes.
	ReadyTimeout time.Duration
	// Workers is how many members are started at once.
	Workers int
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch {
	case o.Namespace == "" || o.Prefix == "" || o.Dir == "":
		return errors.New("namespace, prefix and folder must not be empty")
	case o.ManagerBin == "" || o.ProvisionerBin == "":
		return errors.New("the manager and provisioner binaries must be given")
	case o.AddressPrefix == "" || o.Device == "":
		return errors.New("the address prefix and device must be given")
	case o.Server == "":
		return errors.New("the API server must be given")
	case o.ReadyTimeout <= 0 || o.Workers < 1:
		return errors.New("the ready timeout and workers must be positive")
	}
	return nil
}

// Fleet is the running members. Its methods are not safe for concurrent
// use.
type Fleet struct {
	o      Options
	kube   kubernetes.Interface
	owner  *corev1.ConfigMap
	nodes  fakeNodes
	member []*Member
}

// Member is one fake node with its two processes.
type Member struct {
	// Node is the fake node's name; Address its address; Dir its folder.
	Node, Address, Dir string
	// Manager and Provisioner are its processes.
	Manager, Provisioner *Process
	// ManagerReady is when its manager pod was set Ready.
	ManagerReady time.Time
}

// Process is one started program.
type Process struct {
	Role Role
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// PID returns the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// New makes the owner ConfigMap; Scale adds members.
func New(ctx context.Context, kube kubernetes.Interface, o Options) (*Fleet, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cm, err := kube.CoreV1().ConfigMaps(o.Namespace).Create(ctx, Owner(o.Namespace), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("ConfigMap %s/%s exists: another fleet runs, or one was not cleaned up (scripts/bench-provision.sh cleans up)", o.Namespace, OwnerName)
	}
	if err != nil {
		return nil, fmt.Errorf("create the fleet's owner ConfigMap: %w", err)
	}
	return &Fleet{o: o, kube: kube, owner: cm, nodes: fakeNodes{kube: kube, prefix: o.Prefix}}, nil
}

// Members returns the members, in order.
func (f *Fleet) Members() []*Member { return slices.Clone(f.member) }

// Nodes returns the members' node names, in order.
func (f *Fleet) Nodes() []string {
	names := make([]string, len(f.member))
	for i, m := range f.member {
		names[i] = m.Node
	}
	return names
}

// Scale grows the fleet to n members (it never shrinks): the fake nodes
// first, then each new member's processes and pods, Workers at a time. It
// returns once every new member's pods are Ready.
func (f *Fleet) Scale(ctx context.Context, n int) error {
	if n > MaxMembers {
		return fmt.Errorf("a fleet has at most %d members, asked for %d", MaxMembers, n)
	}
	have := len(f.member)
	if n <= have {
		return nil
	}
	if err := f.nodes.scale(ctx, n); err != nil {
		return err
	}
	added := make([]*Member, n-have)
	errs := make([]error, n-have)
	workqueue.ParallelizeUntil(ctx, f.o.Workers, n-have, func(i int) {
		added[i], errs[i] = f.start(ctx, have+i+1)
	})
	for _, m := range added {
		if m != nil {
			f.member = append(f.member, m)
		}
	}
	return errors.Join(errs...)
}

// start makes member number i: address, folders, manager, provisioner.
func (f *Fleet) start(ctx context.Context, i int) (*Member, error) {
	node := f.o.Prefix + strconv.Itoa(i)
	m := &Member{Node: node, Address: f.o.AddressPrefix + strconv.Itoa(i), Dir: filepath.Join(f.o.Dir, node)}
	if err := exec.CommandContext(ctx, "ip", "addr", "replace", m.Address+"/32", "dev", f.o.Device).Run(); err != nil {
		return nil, fmt.Errorf("%s: add address %s to %s: %w", node, m.Address, f.o.Device, err)
	}
	for _, d := range []string{"hpvolumes", "hppools", "state", "manager", "provisioner"} {
		if err := os.MkdirAll(filepath.Join(m.Dir, d), 0o755); err != nil {
			return m, err
		}
	}
	// A machine and a boot ID of its own, as a host has.
	for _, id := range []string{"machine-id", "boot_id"} {
		if err := os.WriteFile(filepath.Join(m.Dir, id), []byte(randomID()+"\n"), 0o644); err != nil {
			return m, err
		}
	}
	var err error
	if m.Manager, err = f.run(ctx, m, RoleManager); err != nil {
		return m, err
	}
	m.ManagerReady = time.Now()
	m.Provisioner, err = f.run(ctx, m, RoleProvisioner)
	return m, err
}

// run creates role's pod on m's node, its tokens and kubeconfig, starts the
// process, waits for its /readyz and sets the pod Ready.
func (f *Fleet) run(ctx context.Context, m *Member, r Role) (*Process, error) {
	pods := f.kube.CoreV1().Pods(f.o.Namespace)
	p, err := pods.Create(ctx, Pod(r, m.Node, f.o.Namespace, f.owner), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: create pod: %w", m.Node, err)
	}
	dir := filepath.Join(m.Dir, string(r))
	apiToken := filepath.Join(dir, "token")
	if err := f.token(ctx, r, p, nil, apiToken); err != nil {
		return nil, err
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig(f.o.Server, f.o.CAData, apiToken), kc); err != nil {
		return nil, err
	}
	var argv []string
	var health string
	switch r {
	case RoleManager:
		health = fmt.Sprintf("http://%s:%d/readyz", m.Address, ManagerHealthPort)
		argv = managerArgv(f.o.ManagerBin, m, kc, f.o.Namespace)
	case RoleProvisioner:
		managerToken := filepath.Join(dir, "manager-token")
		if err := f.token(ctx, r, p, []string{managerapi.TokenAudience}, managerToken); err != nil {
			return nil, err
		}
		health = fmt.Sprintf("http://%s:%d/readyz", m.Address, ProvisionerMetrics)
		argv = append(append([]string{f.o.ProvisionerBin}, f.o.ProvisionerArgs...),
			"--kubeconfig="+kc, "--node-name="+m.Node, "--namespace="+f.o.Namespace,
			"--manager-token-file="+managerToken,
			fmt.Sprintf("--metrics-address=%s:%d", m.Address, ProvisionerMetrics), "--v=1")
	}
	proc, err := startProcess(r, argv, filepath.Join(dir, "log"), m.Node, f.o.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", m.Node, r, err)
	}
	// For a clean-up after this program was killed (scripts/bench-fleet.sh).
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(proc.PID())+"\n"), 0o644); err != nil {
		return proc, err
	}
	if err := proc.waitReady(ctx, health, f.o.ReadyTimeout); err != nil {
		return proc, fmt.Errorf("%s: %s (PID %d, log %s): %w", m.Node, r, proc.PID(), filepath.Join(dir, "log"), err)
	}
	p.Status = ReadyStatus(r, m.Address, proc.PID(), time.Now())
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return proc, fmt.Errorf("%s: set pod %s Ready: %w", m.Node, p.Name, err)
	}
	return proc, nil
}

// managerArgv is the manager's command line for m: in a private mount
// namespace with m's pool folders on the product's pool paths.
func managerArgv(bin string, m *Member, kubeconfig, namespace string) []string {
	return []string{
		"unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$1" "$2" && mount --bind "$3" "$4" && shift 4 && exec "$@"`, "sh",
		filepath.Join(m.Dir, "hpvolumes"), localcluster.PoolPath, filepath.Join(m.Dir, "hppools"), localcluster.PoolRootPath,
		bin,
		"--node-name=" + m.Node, "--namespace=" + namespace, "--kubeconfig=" + kubeconfig,
		"--pool=default=" + localcluster.PoolPath, "--pool-root=" + localcluster.PoolRootPath,
		"--state-dir=" + filepath.Join(m.Dir, "state"),
		"--machine-id-file=" + filepath.Join(m.Dir, "machine-id"), "--boot-id-file=" + filepath.Join(m.Dir, "boot_id"),
		fmt.Sprintf("--listen-address=%s:%d", m.Address, ManagerPort),
		fmt.Sprintf("--health-address=%s:%d", m.Address, ManagerHealthPort),
		"--v=1",
	}
}

// token writes a token of r's service account bound to p to file.
func (f *Fleet) token(ctx context.Context, r Role, p *corev1.Pod, audiences []string, file string) error {
	tr, err := f.kube.CoreV1().ServiceAccounts(f.o.Namespace).CreateToken(ctx, r.Name(), tokenRequest(p, audiences), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of %s for pod %s: %w", r.Name(), p.Name, err)
	}
	return os.WriteFile(file, []byte(tr.Status.Token), 0o600)
}

// Close stops every process by PID, deletes the owner ConfigMap (the pods
// go with it, and are deleted at once too), the fake nodes and the
// addresses. It reports what it could not undo.
func (f *Fleet) Close(ctx context.Context) error {
	var errs []error
	var mu sync.Mutex
	workqueue.ParallelizeUntil(context.WithoutCancel(ctx), 16, len(f.member), func(i int) {
		m := f.member[i]
		for _, p := range []*Process{m.Provisioner, m.Manager} {
			if err := p.stop(10 * time.Second); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", m.Node, err))
				mu.Unlock()
			}
		}
	})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	err := f.kube.CoreV1().ConfigMaps(f.o.Namespace).Delete(cctx, OwnerName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	err = f.kube.CoreV1().Pods(f.o.Namespace).DeleteCollection(cctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: FleetLabel + "=true"})
	if err != nil {
		errs = append(errs, fmt.Errorf("delete the fleet's pods: %w", err))
	}
	errs = append(errs, f.nodes.close(cctx))
	for _, m := range f.member {
		if out, err := exec.Command("ip", "addr", "del", m.Address+"/32", "dev", f.o.Device).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("remove address %s: %w: %s", m.Address, err, out))
		}
	}
	f.member = nil
	return errors.Join(errs...)
}

// startProcess starts argv with its output in logFile and the environment
// the DaemonSets give (NODE_NAME, POD_NAMESPACE).
func startProcess(r Role, argv []string, logFile, node, namespace string) (*Process, error) {
	out, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "NODE_NAME="+node, "POD_NAMESPACE="+namespace)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Role: r, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// waitReady polls url until it answers 200, the process exits or timeout.
func (p *Process) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("exited: %v", p.err)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// stop sends SIGTERM and, after grace, SIGKILL; nil p is stopped.
func (p *Process) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s (PID %d): %w", p.Role, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		klog.InfoS("Killing a process that did not stop", "role", p.Role, "pid", p.PID(), "grace", grace)
		_ = p.cmd.Process.Kill()
		<-p.done
		return nil
	}
}

// fakeNodes keeps the fleet's fake nodes with package fakenodes, one
// renewer at a time.
type fakeNodes struct {
	kube   kubernetes.Interface
	prefix string
	cancel context.CancelFunc
	done   chan error
}

// scale replaces the renewer with one for n nodes and waits until they are
// Ready.
func (fn *fakeNodes) scale(ctx context.Context, n int) error {
	fn.stop()
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready, done := make(chan struct{}), make(chan error, 1)
	o := fakenodes.Options{Prefix: fn.prefix, Count: n, RenewInterval: 10 * time.Second, Workers: 16}
	go func() { done <- fakenodes.Run(rctx, fn.kube, o, func() { close(ready) }) }()
	fn.cancel, fn.done = cancel, done
	select {
	case <-ready:
		return nil
	case err := <-done:
		fn.cancel, fn.done = nil, nil
		cancel()
		return fmt.Errorf("fake nodes: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (fn *fakeNodes) stop() {
	if fn.cancel != nil {
		fn.cancel()
		<-fn.done
		fn.cancel, fn.done = nil, nil
	}
}

// close stops the renewer and deletes the fleet's nodes.
func (fn *fakeNodes) close(ctx context.Context) error {
	fn.stop()
	_, err := fakenodes.Delete(ctx, fn.kube, 16)
	return err
}
