package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/e2e/framework/localcluster"
)

// PollInterval is how often WaitFor checks its condition.
const PollInterval = 250 * time.Millisecond

// WaitFor polls cond until it returns true, fails the test with what and the
// last error if timeout passes first. cond's errors are not fatal: polling
// goes on, and the last one is reported.
func WaitFor(ctx context.Context, t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		if last != nil {
			t.Fatalf("Timed out after %v waiting for %s: last error: %v", timeout, what, last)
		}
		t.Fatalf("Timed out after %v waiting for %s", timeout, what)
	}
}

// RandomSuffix is 8 random lowercase hex characters for unique names.
func RandomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for the test, named after it, and deletes it
// when the test ends. If the test failed, it first dumps the namespace's and
// the product's events and logs (DumpOnFailure).
func (f *Framework) Namespace(ctx context.Context, t testing.TB) string {
	t.Helper()
	base := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   "e2e-" + base + "-" + RandomSuffix(),
		Labels: map[string]string{"hostpath.dev/e2e": "true"},
	}}
	if _, err := f.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create namespace %s: %v", ns.Name, err)
	}
	// Pods are refused until the controller manager made the default
	// ServiceAccount.
	WaitFor(ctx, t, time.Minute, "ServiceAccount "+ns.Name+"/default", func(ctx context.Context) (bool, error) {
		_, err := f.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	t.Cleanup(func() {
		// The test's context may be cancelled by now.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			f.DumpOnFailure(cctx, t, ns.Name)
		}
		err := f.Client.CoreV1().Namespaces().Delete(cctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("Delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// DeleteNamespace deletes the namespace ns, as a user would (`kubectl
// delete namespace`), and waits until it is gone: everything in it, its
// claims included, is deleted by then.
func (f *Framework) DeleteNamespace(ctx context.Context, t testing.TB, ns string, timeout time.Duration) {
	t.Helper()
	if err := f.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("Delete namespace %s: %v", ns, err)
	}
	WaitFor(ctx, t, timeout, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		n, err := f.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("namespace is %s", n.Status.Phase)
	})
}

// APINode creates node, a Node object that no kubelet runs (it never
// becomes Ready), and deletes it when the test ends. Label it
// localcluster.FakeNodeLabel=true so that other tests do not take it for a
// real node.
func (f *Framework) APINode(ctx context.Context, t testing.TB, node *corev1.Node) {
	t.Helper()
	if _, err := f.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create node %s: %v", node.Name, err)
	}
	t.Cleanup(func() {
		// The test's context may be cancelled by now.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.Client.CoreV1().Nodes().Delete(cctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("Delete node %s: %v", node.Name, err)
		}
	})
}

// WaitForPodPhase waits until the pod is in one of phases; it fails the test
// at once if the pod reaches another terminal phase.
func (f *Framework) WaitForPodPhase(ctx context.Context, t testing.TB, ns, name string, timeout time.Duration, phases ...corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	WaitFor(ctx, t, timeout, fmt.Sprintf("pod %s/%s to be %v", ns, name, phases), func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		for _, ph := range phases {
			if p.Status.Phase == ph {
				return true, nil
			}
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			logs, _ := f.PodLogs(ctx, ns, name, "")
			t.Fatalf("Pod %s/%s is %s, want %v; logs:\n%s", ns, name, p.Status.Phase, phases, logs)
		}
		return false, fmt.Errorf("pod is %s: %s", p.Status.Phase, podWaitReasons(p))
	})
	return pod
}

// WaitForPodRunning waits until the pod runs and all its containers are ready.
func (f *Framework) WaitForPodRunning(ctx context.Context, t testing.TB, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	pod := f.WaitForPodPhase(ctx, t, ns, name, timeout, corev1.PodRunning)
	WaitFor(ctx, t, timeout, fmt.Sprintf("pod %s/%s to be ready", ns, name), func(ctx context.Context) (bool, error) {
		p, err := f.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return component.PodReady(p), nil
	})
	return pod
}

// WaitForPodSucceeded waits until the pod has completed successfully.
func (f *Framework) WaitForPodSucceeded(ctx context.Context, t testing.TB, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	return f.WaitForPodPhase(ctx, t, ns, name, timeout, corev1.PodSucceeded)
}

func podWaitReasons(p *corev1.Pod) string {
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			out = append(out, fmt.Sprintf("%s waiting: %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			out = append(out, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return strings.Join(out, "; ")
}

// PodLogs returns a container's log (the first container if container is
// empty), read through the API server.
func (f *Framework) PodLogs(ctx context.Context, ns, name, container string) (string, error) {
	opts := &corev1.PodLogOptions{Container: container}
	b, err := f.Client.CoreV1().Pods(ns).GetLogs(name, opts).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of pod %s/%s: %w", ns, name, err)
	}
	return string(b), nil
}

// Kubectl runs the cluster's kubectl with the framework's kubeconfig and
// returns its standard output; on failure the error includes standard error.
func (f *Framework) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, f.KubectlPath, append([]string{"--kubeconfig", f.Kubeconfig}, args...)...)
	cmd.Dir = f.RepoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ServiceAccountToken returns a token of ns/sa from the TokenRequest API,
// valid for an hour, for the given audiences (the API server's if none),
// bound to no object: what `kubectl create token` gives.
func (f *Framework) ServiceAccountToken(ctx context.Context, ns, sa string, audiences ...string) (string, error) {
	return f.token(ctx, ns, sa, nil, audiences)
}

// PodBoundToken returns a token of the service account of pod (in its
// namespace) for audiences, bound to pod (name and UID), as the kubelet
// projects one into the pod's volumes: TokenReview's extra then names the
// pod and its node, and the token dies with the pod.
func (f *Framework) PodBoundToken(ctx context.Context, pod *corev1.Pod, audiences ...string) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return f.token(ctx, pod.Namespace, sa, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}, audiences)
}

// token returns a token of ns/sa for audiences, valid for an hour, bound
// to bound (nil: to nothing).
func (f *Framework) token(ctx context.Context, ns, sa string, bound *authenticationv1.BoundObjectReference, audiences []string) (string, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    bound,
	}}
	res, err := f.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create token for %s/%s: %w", ns, sa, err)
	}
	return res.Status.Token, nil
}

// TestToolsPod is a pod of the testtools image pinned to node that runs
// command (through /bin/sh -c when it is a single string) and is never
// restarted.
func TestToolsPod(ns, name, node string, command ...string) *corev1.Pod {
	if len(command) == 1 {
		command = []string{"/bin/sh", "-c", command[0]}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           TestToolsImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         command,
			}},
		},
	}
}

// TwoRealNodes returns the real nodes, sorted, and fails the test when there
// are fewer than two: every test that compares nodes needs a second one.
func (f *Framework) TwoRealNodes(ctx context.Context, t testing.TB) []string {
	t.Helper()
	nodes, err := localcluster.RealNodes(ctx, f.Client)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) < 2 {
		t.Fatalf("Need at least 2 real nodes, found %v", nodes)
	}
	return nodes
}

// ReadyPodsByNode waits until every node of nodes runs a Ready pod matching
// selector in namespace ns, and returns one such pod per node.
func (f *Framework) ReadyPodsByNode(ctx context.Context, t testing.TB, ns, selector string, nodes []string, timeout time.Duration) map[string]*corev1.Pod {
	t.Helper()
	byNode := map[string]*corev1.Pod{}
	WaitFor(ctx, t, timeout, fmt.Sprintf("a Ready pod %s on every node", selector), func(ctx context.Context) (bool, error) {
		pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		clear(byNode)
		for i := range pods.Items {
			p := &pods.Items[i]
			if component.PodServing(p) && p.Status.PodIP != "" {
				byNode[p.Spec.NodeName] = p
			}
		}
		for _, n := range nodes {
			if byNode[n] == nil {
				return false, fmt.Errorf("no Ready pod %s on %s", selector, n)
			}
		}
		return true, nil
	})
	return byNode
}
