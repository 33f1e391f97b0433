package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Role is one of the two programs of a node: RoleManager or
// RoleProvisioner.
type Role string

// The roles, each named as its DaemonSet's pods are labelled
// (app.kubernetes.io/name=hostpath-ROLE) and its service account.
const (
	RoleManager     Role = "manager"
	RoleProvisioner Role = "provisioner"
)

// Labels of a member's pods.
const (
	// NameLabel is the label the product's selectors use (the DaemonSets'
	// template labels): app.kubernetes.io/name=hostpath-ROLE.
	NameLabel = "app.kubernetes.io/name"
	// FleetLabel=true marks the fleet's pods and its owner ConfigMap.
	FleetLabel = "hostpath.dev/bench-fleet"
)

// OwnerName is the ConfigMap in the product's namespace that owns (as
// controller) every pod of the fleet: a DaemonSet adopts only pods without
// a controller, so the product's DaemonSets leave the fleet's pods alone,
// and deleting the ConfigMap lets the garbage collector take the pods.
const OwnerName = "hostpath-bench-fleet"

// tokenLifetime is what the fleet asks for its bound tokens: longer than
// any benchmark; the API server may shorten it, never below 10 minutes.
const tokenLifetime = 6 * time.Hour

// Name returns the name of a service account, of a role's pods and of its
// label value: hostpath-ROLE.
func (r Role) Name() string { return "hostpath-" + string(r) }

// PodName returns the name of the pod of role on node.
func PodName(r Role, node string) string { return fmt.Sprintf("%s-%s", r.Name(), node) }

// Owner returns the ConfigMap OwnerName.
func Owner(namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: OwnerName, Namespace: namespace, Labels: map[string]string{FleetLabel: "true"},
	}}
}

// Pod returns the pod object of role on node, controlled by own: what the
// DaemonSet would create there, with a container that never runs (no
// kubelet serves a fake node) and no service account token mounted (the
// process gets its tokens from files).
func Pod(r Role, node, namespace string, own *corev1.ConfigMap) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(r, node),
			Namespace: namespace,
			Labels:    map[string]string{NameLabel: r.Name(), FleetLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: own.Name, UID: own.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			ServiceAccountName:           r.Name(),
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: string(r), Image: "hostpath.dev/bench-fleet:process"}},
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
}

// ReadyStatus returns the status of a pod whose process pid serves on ip
// since since: Running and Ready, as a kubelet would report it.
func ReadyStatus(r Role, ip string, pid int, since time.Time) corev1.PodStatus {
	t := metav1.NewTime(since)
	cond := func(c corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: t}
	}
	return corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    ip,
		HostIPs:   []corev1.HostIP{{IP: ip}},
		PodIP:     ip,
		PodIPs:    []corev1.PodIP{{IP: ip}},
		StartTime: &t,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled), cond(corev1.PodInitialized), cond(corev1.ContainersReady), cond(corev1.PodReady),
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:        string(r),
			Ready:       true,
			Started:     ptr.To(true),
			Image:       "hostpath.dev/bench-fleet:process",
			ImageID:     "hostpath.dev/bench-fleet:process",
			ContainerID: fmt.Sprintf("process://%d", pid),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		}},
	}
}

// tokenRequest asks for a token of audiences (empty: the API server's)
// bound to p, as the kubelet's projected volumes do: the API server then
// puts the pod's name, UID and node in the token's user info.
func tokenRequest(p *corev1.Pod, audiences []string) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}
}

// kubeconfig returns a kubeconfig reaching server (trusting caData) with the
// bearer token in tokenFile, read again as it changes, as in-cluster
// configuration reads the pod's token.
func kubeconfig(server string, caData []byte, tokenFile string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos["pod"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "pod"}
	cfg.CurrentContext = "pod"
	return cfg
}

// randomID returns 32 random hex digits, as /etc/machine-id and the
// kernel's boot ID (without dashes) hold.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
