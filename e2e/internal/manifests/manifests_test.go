package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"

	"hostpath.dev/e2e/framework"
)

// The names the manifests and the docs share.
const (
	namespace        = "hostpath-system"
	managerName      = "hostpath-manager"
	provisionerName  = "hostpath-provisioner"
	hostdefinerName  = "hostpath-hostdefiner"
	managerContainer = "manager"
	// poolsConfigMap holds the pools; the manager reads its mount at
	// poolsMount.
	poolsConfigMap = "hostpath-pools"
	poolsMount     = "/etc/hostpath/pools"
	// debugLabel opens the manager's ports to a pod of any namespace.
	debugLabel = "hostpath.dev/manager-client"
	// monitoringLabel opens the health port to every pod of a namespace.
	monitoringLabel = "hostpath.dev/monitoring"
	// poolFast is the component that adds the pool fast.
	poolFast = "components/pool-fast"
	// controlPlane is the component that adds the node agents to
	// control-plane nodes.
	controlPlane = "components/control-plane"
)

// nodeAgents are the DaemonSets that run on the nodes.
var nodeAgents = []string{managerName, provisionerName}

// controlPlaneTaint is the taint of kubeadm's control-plane nodes.
var controlPlaneTaint = corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}

// TestBaseManagerNetworkPolicy checks who the manager's NetworkPolicy lets
// in, by evaluating it for the product's own pods and for others.
func TestBaseManagerNetworkPolicy(t *testing.T) {
	m := render(t, "")
	manager := m.daemonSet(t, managerName)
	np := m.networkPolicy(t, managerName)
	if np.Namespace != manager.Namespace {
		t.Fatalf("NetworkPolicy in namespace %q, manager in %q", np.Namespace, manager.Namespace)
	}

	// It selects exactly the manager DaemonSet's pods.
	if !equalSelectors(np.Spec.PodSelector, *manager.Spec.Selector) {
		t.Errorf("NetworkPolicy podSelector %v, manager DaemonSet selector %v: want the same", np.Spec.PodSelector, *manager.Spec.Selector)
	}
	managerLabels := manager.Spec.Template.Labels
	if !selects(t, np.Spec.PodSelector, managerLabels) {
		t.Errorf("NetworkPolicy podSelector %v does not select the manager pods (%v)", np.Spec.PodSelector, managerLabels)
	}
	provisionerLabels := m.daemonSet(t, provisionerName).Spec.Template.Labels
	hostdefinerLabels := m.deployment(t, hostdefinerName).Spec.Template.Labels
	for _, l := range []map[string]string{provisionerLabels, hostdefinerLabels} {
		if selects(t, np.Spec.PodSelector, l) {
			t.Errorf("NetworkPolicy podSelector %v selects pods labelled %v too", np.Spec.PodSelector, l)
		}
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want [Ingress] (egress is not restricted)", np.Spec.PolicyTypes)
	}

	ports := container(t, manager.Spec.Template.Spec, managerContainer).Ports
	checkPolicyPorts(t, np, ports)
	https, health := namedPort(t, ports, "https"), namedPort(t, ports, "health")

	systemNS := m.namespaceLabels(t, namespace)
	cases := []struct {
		what          string
		from          peer
		https, health bool
	}{
		{"a provisioner pod", peer{namespace, systemNS, provisionerLabels}, true, true},
		{"a host definer pod", peer{namespace, systemNS, hostdefinerLabels}, true, true},
		{"a debugging pod in another namespace", peer{"default", nsLabels("default", nil), map[string]string{debugLabel: "true", "run": "curl"}}, true, true},
		{"a debugging pod in hostpath-system", peer{namespace, systemNS, map[string]string{debugLabel: "true"}}, true, true},
		{"a pod of a monitoring namespace", peer{"monitoring", nsLabels("monitoring", map[string]string{monitoringLabel: "true"}), map[string]string{"app.kubernetes.io/name": "prometheus"}}, false, true},
		{"a pod with the debugging label set to false", peer{"default", nsLabels("default", nil), map[string]string{debugLabel: "false"}}, false, false},
		{"another pod in hostpath-system", peer{namespace, systemNS, map[string]string{"app": "other"}}, false, false},
		{"a pod with the provisioner's labels in another namespace", peer{"other", nsLabels("other", nil), provisionerLabels}, false, false},
		{"a pod with the host definer's labels in another namespace", peer{"other", nsLabels("other", nil), hostdefinerLabels}, false, false},
		{"a pod of a namespace labelled for monitoring with another value", peer{"monitoring", nsLabels("monitoring", map[string]string{monitoringLabel: "false"}), nil}, false, false},
	}
	for _, c := range cases {
		if got := admits(t, np, c.from, https); got != c.https {
			t.Errorf("%s (%+v) reaches the manager's https port: %v, want %v", c.what, c.from, got, c.https)
		}
		if got := admits(t, np, c.from, health); got != c.health {
			t.Errorf("%s (%+v) reaches the manager's health port: %v, want %v", c.what, c.from, got, c.health)
		}
	}
}

// TestBaseNodeAgentsPriority checks that both node agents are
// system-node-critical.
func TestBaseNodeAgentsPriority(t *testing.T) {
	m := render(t, "")
	for _, name := range nodeAgents {
		if got := m.daemonSet(t, name).Spec.Template.Spec.PriorityClassName; got != "system-node-critical" {
			t.Errorf("DaemonSet %s: priorityClassName %q, want system-node-critical", name, got)
		}
	}
}

// TestBasePools checks the base's one pool: in the ConfigMap the manager
// and the admission policy read, mounted, and the one every example class
// names.
func TestBasePools(t *testing.T) {
	m := render(t, "")
	pools := checkPools(t, m)
	if want := map[string]string{"default": "/var/hpvolumes"}; !maps.Equal(pools, want) {
		t.Errorf("manager pools %v, want %v", pools, want)
	}
	checkClassPools(t, m, pools)
}

// TestPoolFastComponent renders an overlay of the base with the component
// pool-fast, as docs/operations.md's "Adding a pool" shows, and checks that it adds
// the pool fast to the manager (ConfigMap key, volume, mount) and the class
// hostpath-fast, and changes nothing else.
func TestPoolFastComponent(t *testing.T) {
	base := render(t, "")
	m := render(t, poolFast)
	pools := checkPools(t, m)
	if want := map[string]string{"default": "/var/hpvolumes", "fast": "/mnt/nvme/hostpath"}; !maps.Equal(pools, want) {
		t.Errorf("manager pools %v, want %v", pools, want)
	}
	spec := m.daemonSet(t, managerName).Spec.Template.Spec
	if v := volume(spec, "pool-fast"); v == nil || v.HostPath == nil || v.HostPath.Path != "/mnt/nvme/hostpath" {
		t.Errorf("no hostPath volume pool-fast of /mnt/nvme/hostpath: %+v", v)
	}
	checkClassPools(t, m, pools)

	fast := m.storageClass(t, "hostpath-fast")
	reference := base.storageClass(t, "hostpath")
	if fast.Parameters["pool"] != "fast" {
		t.Errorf("class hostpath-fast: pool %q, want fast", fast.Parameters["pool"])
	}
	if fast.Provisioner != reference.Provisioner {
		t.Errorf("class hostpath-fast: provisioner %q, want %q", fast.Provisioner, reference.Provisioner)
	}

	// Nothing else changes: the same objects plus the class, the same
	// content but the manager DaemonSet's.
	checkOnlyChanged(t, base, m, []key{{"DaemonSet", namespace, managerName}, {"ConfigMap", namespace, poolsConfigMap}}, key{"StorageClass", "", "hostpath-fast"})
}

// TestBaseNodeAgentsOffControlPlane checks that the base's node agents
// tolerate no taint, the control-plane one included: control-plane nodes
// are opt-in, so no claim can put a volume on one. The list is there,
// empty, for overlays to append to.
func TestBaseNodeAgentsOffControlPlane(t *testing.T) {
	m := render(t, "")
	for _, name := range nodeAgents {
		spec := m.daemonSet(t, name).Spec.Template.Spec
		if tolerates(spec.Tolerations, controlPlaneTaint) || len(spec.Tolerations) != 0 {
			t.Errorf("DaemonSet %s tolerates %v, want nothing (control-plane nodes only with %s)", name, spec.Tolerations, controlPlane)
		}
		if !bytes.Contains(m.docs[key{"DaemonSet", namespace, name}], []byte("tolerations: []")) {
			t.Errorf("DaemonSet %s has no empty tolerations list for overlays to append to", name)
		}
	}
	if !tolerates(m.deployment(t, hostdefinerName).Spec.Template.Spec.Tolerations, controlPlaneTaint) {
		t.Errorf("the host definer, which serves the cluster and takes no claims, does not tolerate %v any more", controlPlaneTaint)
	}
}

// TestControlPlaneComponent renders an overlay of the base with the
// component control-plane, as docs/operations.md's "Node agents" shows, and checks
// that both node agents then tolerate the control-plane taint, alike (the
// provisioner must run wherever the manager does), and that nothing else
// changes.
func TestControlPlaneComponent(t *testing.T) {
	base := render(t, "")
	m := render(t, controlPlane)
	var changed []key
	for _, name := range nodeAgents {
		k := key{"DaemonSet", namespace, name}
		changed = append(changed, k)
		got, want := m.daemonSet(t, name), base.daemonSet(t, name)
		if !tolerates(got.Spec.Template.Spec.Tolerations, controlPlaneTaint) {
			t.Errorf("DaemonSet %s tolerates %v, not %v", name, got.Spec.Template.Spec.Tolerations, controlPlaneTaint)
		}
		if len(got.Spec.Template.Spec.Tolerations) != 1 {
			t.Errorf("DaemonSet %s tolerates %v, want the control-plane taint only", name, got.Spec.Template.Spec.Tolerations)
		}
		got.Spec.Template.Spec.Tolerations, want.Spec.Template.Spec.Tolerations = nil, nil
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("DaemonSet %s changes with the component in more than its tolerations", name)
		}
	}
	checkOnlyChanged(t, base, m, changed)
}

// tolerates reports whether tols tolerate taint.
func tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(tols, func(tol corev1.Toleration) bool {
		return tol.ToleratesTaint(klog.Background(), &taint, false)
	})
}

// checkOnlyChanged checks that a rendering with a component, m, has the
// objects of base plus added, each the same document but those of changed.
func checkOnlyChanged(t *testing.T, base, m *manifests, changed []key, added ...key) {
	t.Helper()
	for k, doc := range base.docs {
		got, ok := m.docs[k]
		switch {
		case !ok:
			t.Errorf("%v is missing with the component", k)
		case !slices.Contains(changed, k) && !bytes.Equal(got, doc):
			t.Errorf("%v changes with the component:\n%s\nwant:\n%s", k, got, doc)
		}
	}
	for k := range m.docs {
		if _, ok := base.docs[k]; !ok && !slices.Contains(added, k) {
			t.Errorf("the component adds %v", k)
		}
	}
}

// checkPools checks the pools of the ConfigMap hostpath-pools, which the
// manager reads (--pools-config, a read-only mount of that ConfigMap) and
// the admission policy takes as parameters, against the manager's volumes:
// each pool.NAME of PATH has one mount of PATH, with HostToContainer
// propagation, of a DirectoryOrCreate hostPath volume of the same PATH
// (the manager reports paths as it sees them, and PVs use them on the
// host). It returns the pools, name to path.
func checkPools(t *testing.T, m *manifests) map[string]string {
	t.Helper()
	spec := m.daemonSet(t, managerName).Spec.Template.Spec
	c := container(t, spec, managerContainer)
	if !slices.Contains(c.Args, "--pools-config="+poolsMount) {
		t.Errorf("manager args %q: no --pools-config=%s", c.Args, poolsMount)
	}
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--pool=") || strings.HasPrefix(arg, "--pool-root=") {
			t.Errorf("manager arg %q: pools come from the ConfigMap %s only", arg, poolsConfigMap)
		}
	}
	cmMounts := 0
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != poolsMount {
			continue
		}
		cmMounts++
		if v := volume(spec, vm.Name); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != poolsConfigMap || !vm.ReadOnly {
			t.Errorf("mount %s at %s: want a read-only mount of ConfigMap %s, got volume %+v", vm.Name, poolsMount, poolsConfigMap, v)
		}
	}
	if cmMounts != 1 {
		t.Errorf("%d mounts at %s, want 1", cmMounts, poolsMount)
	}
	cm := &corev1.ConfigMap{}
	m.decode(t, key{"ConfigMap", namespace, poolsConfigMap}, cm)
	pools := map[string]string{}
	for k, path := range cm.Data {
		name, ok := strings.CutPrefix(k, "pool.")
		if !ok {
			if k != "poolRoot" {
				t.Errorf("ConfigMap %s: key %q is neither pool.NAME nor poolRoot", poolsConfigMap, k)
			}
			continue
		}
		pools[name] = path
		mounts := 0
		for _, vm := range c.VolumeMounts {
			if vm.MountPath != path {
				continue
			}
			mounts++
			if vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationHostToContainer {
				t.Errorf("pool %s: mount %s has propagation %v, want HostToContainer", name, vm.Name, vm.MountPropagation)
			}
			if vm.ReadOnly {
				t.Errorf("pool %s: mount %s is read-only", name, vm.Name)
			}
			v := volume(spec, vm.Name)
			switch {
			case v == nil:
				t.Errorf("pool %s: mount %s names no volume", name, vm.Name)
			case v.HostPath == nil:
				t.Errorf("pool %s: volume %s is not a hostPath volume", name, v.Name)
			case v.HostPath.Path != path:
				t.Errorf("pool %s: volume %s is host path %s, mounted at %s: want the same", name, v.Name, v.HostPath.Path, path)
			case v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate:
				t.Errorf("pool %s: volume %s has type %v, want DirectoryOrCreate", name, v.Name, v.HostPath.Type)
			}
		}
		if mounts != 1 {
			t.Errorf("pool %s: %d mounts at %s, want 1", name, mounts, path)
		}
	}
	if root := cm.Data["poolRoot"]; root != "" && volume(spec, "pool-root") == nil {
		t.Errorf("ConfigMap %s: poolRoot %s is not mounted", poolsConfigMap, root)
	}
	return pools
}

// checkClassPools checks that every StorageClass of ours names a pool the
// managers serve.
func checkClassPools(t *testing.T, m *manifests, pools map[string]string) {
	t.Helper()
	for k := range m.docs {
		if k.kind != "StorageClass" {
			continue
		}
		sc := m.storageClass(t, k.name)
		pool := sc.Parameters["pool"]
		if pool == "" {
			pool = "default"
		}
		if _, ok := pools[pool]; !ok {
			t.Errorf("class %s names pool %q, not a --pool of the manager (%v)", sc.Name, pool, pools)
		}
	}
}

// checkPolicyPorts checks that every port of the policy is one of the
// manager container's ports, by name or number and protocol, and that every
// container port is in some rule.
func checkPolicyPorts(t *testing.T, np *networkingv1.NetworkPolicy, ports []corev1.ContainerPort) {
	t.Helper()
	covered := map[string]bool{}
	for i, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Errorf("ingress rule %d names no port: it opens every port", i)
		}
		for _, pp := range rule.Ports {
			found := false
			for _, cp := range ports {
				if portMatches(pp, cp) {
					found, covered[cp.Name] = true, true
				}
			}
			if !found || pp.EndPort != nil {
				t.Errorf("ingress rule %d: port %v is not one of the manager's ports %v", i, pp, ports)
			}
		}
		for _, p := range rule.From {
			if p.IPBlock != nil {
				t.Errorf("ingress rule %d: an ipBlock peer %v", i, p.IPBlock)
			}
		}
	}
	for _, cp := range ports {
		if !covered[cp.Name] {
			t.Errorf("the manager's port %s (%d) is in no ingress rule", cp.Name, cp.ContainerPort)
		}
	}
}

// peer is a pod that connects to a manager.
type peer struct {
	namespace string
	// nsLabels are its namespace's labels.
	nsLabels map[string]string
	labels   map[string]string
}

// nsLabels returns the labels of a namespace: extra plus the one the API
// server sets on every namespace.
func nsLabels(name string, extra map[string]string) map[string]string {
	l := map[string]string{corev1.LabelMetadataName: name}
	maps.Copy(l, extra)
	return l
}

// admits tells whether np lets p connect to port of a pod it selects, as
// NetworkPolicy defines it (a connection is allowed when some ingress rule
// matches both its port and its source).
func admits(t *testing.T, np *networkingv1.NetworkPolicy, p peer, port corev1.ContainerPort) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		portOK := len(rule.Ports) == 0
		for _, pp := range rule.Ports {
			portOK = portOK || portMatches(pp, port)
		}
		if !portOK {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, from := range rule.From {
			if from.IPBlock != nil {
				continue
			}
			nsOK := from.NamespaceSelector == nil && p.namespace == np.Namespace ||
				from.NamespaceSelector != nil && selects(t, *from.NamespaceSelector, p.nsLabels)
			podOK := from.PodSelector == nil || selects(t, *from.PodSelector, p.labels)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

// portMatches tells whether a policy port covers a container port.
func portMatches(pp networkingv1.NetworkPolicyPort, cp corev1.ContainerPort) bool {
	proto := corev1.ProtocolTCP
	if pp.Protocol != nil {
		proto = *pp.Protocol
	}
	cproto := cp.Protocol
	if cproto == "" {
		cproto = corev1.ProtocolTCP
	}
	if proto != cproto {
		return false
	}
	switch {
	case pp.Port == nil:
		return true
	case pp.Port.Type == intstr.String:
		return pp.Port.StrVal == cp.Name
	case pp.EndPort != nil:
		return pp.Port.IntVal <= cp.ContainerPort && cp.ContainerPort <= *pp.EndPort
	default:
		return pp.Port.IntVal == cp.ContainerPort
	}
}

// selects tells whether sel matches a set of labels.
func selects(t *testing.T, sel metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(l))
}

// equalSelectors compares two label selectors by what they require.
func equalSelectors(a, b metav1.LabelSelector) bool {
	sa, errA := metav1.LabelSelectorAsSelector(&a)
	sb, errB := metav1.LabelSelectorAsSelector(&b)
	return errA == nil && errB == nil && sa.String() == sb.String()
}

func namedPort(t *testing.T, ports []corev1.ContainerPort, name string) corev1.ContainerPort {
	t.Helper()
	for _, p := range ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("the manager container has no port %q: %v", name, ports)
	return corev1.ContainerPort{}
}

func container(t *testing.T, spec corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// key names a rendered object.
type key struct{ kind, namespace, name string }

func (k key) String() string {
	if k.namespace == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.namespace + "/" + k.name
}

// manifests are the objects of one rendering, each as its YAML document.
type manifests struct{ docs map[key][]byte }

// render runs `kubectl kustomize` on manifests/, or, with a component (a
// path below manifests/), on an overlay in a temporary folder that lists
// manifests/ and the component by relative paths, as a user's overlay does
// (kustomize refuses absolute ones).
func render(t *testing.T, component string) *manifests {
	t.Helper()
	root, err := framework.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "manifests")
	if component == "" {
		return kustomize(t, root, base)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	overlay := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n",
		filepath.ToSlash(rel), filepath.ToSlash(filepath.Join(rel, component)))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, root, dir)
}

// renderDir runs `kubectl kustomize` on a kustomization below manifests/,
// such as base or openshift.
func renderDir(t *testing.T, dir string) *manifests {
	t.Helper()
	root, err := framework.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return kustomize(t, root, filepath.Join(root, "manifests", filepath.FromSlash(dir)))
}

// kustomize runs the pinned `kubectl kustomize dir` and parses its output.
func kustomize(t *testing.T, root, dir string) *manifests {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl(t, root), "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize %s: %v: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return parse(t, stdout.Bytes())
}

// kubectl returns the pinned kubectl, or skips the test when it is not
// built yet (`make k8s`; CI runs the unit tests before it), unless
// HOSTPATH_E2E_REQUIRED is "true" (the e2e phase, after the build).
func kubectl(t *testing.T, root string) string {
	t.Helper()
	version, err := framework.KubernetesVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, ".cache", "k8s", version, "bin", "kubectl")
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("manifests not rendered: no kubectl at %s (it comes with the Kubernetes build: `make k8s`)", path)
		if os.Getenv(framework.RequiredEnv) == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// parse splits kustomize's output into documents, keyed by kind, namespace
// and name.
func parse(t *testing.T, out []byte) *manifests {
	t.Helper()
	m := &manifests{docs: map[key][]byte{}}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read rendered manifests: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var obj struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		if err := utilyaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("rendered document: %v:\n%s", err, doc)
		}
		k := key{obj.Kind, obj.Namespace, obj.Name}
		if _, dup := m.docs[k]; dup {
			t.Fatalf("%v rendered twice", k)
		}
		m.docs[k] = doc
	}
	return m
}

// decode decodes an object strictly (an unknown or repeated field, a typo,
// fails the test).
func (m *manifests) decode(t *testing.T, k key, into any) {
	t.Helper()
	doc, ok := m.docs[k]
	if !ok {
		t.Fatalf("%v not rendered", k)
	}
	if err := utilyaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%v: %v", k, err)
	}
}

func (m *manifests) daemonSet(t *testing.T, name string) *appsv1.DaemonSet {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	m.decode(t, key{"DaemonSet", namespace, name}, ds)
	return ds
}

func (m *manifests) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	m.decode(t, key{"Deployment", namespace, name}, d)
	return d
}

func (m *manifests) networkPolicy(t *testing.T, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	m.decode(t, key{"NetworkPolicy", namespace, name}, np)
	return np
}

func (m *manifests) storageClass(t *testing.T, name string) *storagev1.StorageClass {
	t.Helper()
	sc := &storagev1.StorageClass{}
	m.decode(t, key{"StorageClass", "", name}, sc)
	return sc
}

// namespaceLabels returns the labels of a rendered namespace, with the one
// the API server adds.
func (m *manifests) namespaceLabels(t *testing.T, name string) map[string]string {
	t.Helper()
	ns := &corev1.Namespace{}
	m.decode(t, key{"Namespace", "", name}, ns)
	return nsLabels(name, ns.Labels)
}
