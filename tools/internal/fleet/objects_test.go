package fleet

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"hostpath.dev/api/runtime/component"
)

// TestPod checks what the product's selectors, the DaemonSet controller and
// the host definer's CSR approver look at.
func TestPod(t *testing.T) {
	own := Owner("hostpath-system")
	own.UID = "u1"
	for _, r := range []Role{RoleManager, RoleProvisioner} {
		p := Pod(r, "fleet-3", "hostpath-system", own)
		sel := labels.SelectorFromSet(labels.Set{NameLabel: "hostpath-" + string(r)})
		if !sel.Matches(labels.Set(p.Labels)) {
			t.Errorf("%s: labels %v do not match the DaemonSet selector %s", r, p.Labels, sel)
		}
		if c := metav1.GetControllerOf(p); c == nil || c.Kind != "ConfigMap" || c.Name != OwnerName || c.UID != "u1" {
			t.Errorf("%s: controller = %+v, want the ConfigMap %s (so no DaemonSet adopts the pod)", r, c, OwnerName)
		}
		if p.Spec.NodeName != "fleet-3" || p.Spec.ServiceAccountName != r.Name() || p.Name != r.Name()+"-fleet-3" {
			t.Errorf("%s: node %q, service account %q, name %q", r, p.Spec.NodeName, p.Spec.ServiceAccountName, p.Name)
		}
		if component.PodServing(p) {
			t.Errorf("%s: a new pod counts as serving", r)
		}
		p.Status = ReadyStatus(r, "198.18.250.3", 42, time.Now())
		if !component.PodServing(p) || p.Status.PodIP != "198.18.250.3" || p.Status.ContainerStatuses[0].ContainerID != "process://42" {
			t.Errorf("%s: status %+v does not serve at 198.18.250.3", r, p.Status)
		}
	}
}

func TestTokenRequest(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
	tr := tokenRequest(p, []string{"hostpath.dev/manager"})
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" || ref.Name != "p" || ref.UID != "u" {
		t.Errorf("bound object = %+v, want pod p/u", ref)
	}
	if !slices.Equal(tr.Spec.Audiences, []string{"hostpath.dev/manager"}) || *tr.Spec.ExpirationSeconds < 3600 {
		t.Errorf("audiences %v, expiration %d", tr.Spec.Audiences, *tr.Spec.ExpirationSeconds)
	}
}

func TestManagerArgv(t *testing.T) {
	m := &Member{Node: "fleet-1", Address: "198.18.250.1", Dir: "/x/fleet-1"}
	argv := managerArgv("/bin/manager", m, "/x/kc", "ns")
	got := strings.Join(argv, " ")
	for _, want := range []string{
		"unshare --mount --propagation private -- sh -c",
		"/x/fleet-1/hpvolumes /var/hpvolumes /x/fleet-1/hppools /var/hppools /bin/manager",
		"--pool=default=/var/hpvolumes", "--listen-address=198.18.250.1:8443", "--health-address=198.18.250.1:8081",
		"--boot-id-file=/x/fleet-1/boot_id", "--node-name=fleet-1", "--namespace=ns", "--kubeconfig=/x/kc",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("argv lacks %q: %s", want, got)
		}
	}
}

func TestKubeconfig(t *testing.T) {
	cfg := kubeconfig("https://198.18.0.1:6443", []byte("ca"), "/t")
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster].Server != "https://198.18.0.1:6443" || cfg.AuthInfos[ctx.AuthInfo].TokenFile != "/t" {
		t.Errorf("kubeconfig %+v", cfg)
	}
	if id := randomID(); len(id) != 32 || id == randomID() {
		t.Errorf("randomID %q", id)
	}
}
