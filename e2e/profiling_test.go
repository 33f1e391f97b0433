package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/e2e/framework"
	"hostpath.dev/manager/pkg/component"
)

// TestProfiling: the host definer serves Go's profiles on its health port
// only with --profiling (the provisioner shares the same flag and package):
// without it /debug/pprof/ is 404; with it a heap profile and the
// command line are there, while /healthz still answers.
func TestProfiling(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	pod := e.hostDefinerPod(ctx, t, false)
	if code, body := e.pprofGet(ctx, t, pod, "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("GET /debug/pprof/ without --profiling = %d %.200q, want 404", code, body)
	}

	e.setHostDefinerArg(ctx, t, "--profiling")
	pod = e.hostDefinerPod(ctx, t, true)
	for _, tc := range []struct{ path, want string }{
		{"/debug/pprof/heap?debug=1", "heap profile:"},
		{"/debug/pprof/cmdline", "--profiling"},
		{"/healthz", "ok"},
	} {
		if code, body := e.pprofGet(ctx, t, pod, tc.path); code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s with --profiling = %d %.200q, want 200 with %q", tc.path, code, body, tc.want)
		}
	}
}

// hostDefinerPod waits for a serving host definer pod whose arguments have
// --profiling (or have not) and returns it.
func (e *hdEnv) hostDefinerPod(ctx context.Context, t *testing.T, profiling bool) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	framework.WaitFor(ctx, t, provisionTimeout, fmt.Sprintf("a Ready host definer pod, --profiling %v", profiling), func(ctx context.Context) (bool, error) {
		pods, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: hostdefinerSelector})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if component.PodServing(p) && p.Status.PodIP != "" && slices.Contains(p.Spec.Containers[0].Args, "--profiling") == profiling {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// pprofGet returns the status and body of GET path on pod's health port.
func (e *hdEnv) pprofGet(ctx context.Context, t *testing.T, pod *corev1.Pod, path string) (int, string) {
	t.Helper()
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, "8081") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s from host definer pod %s: %v", path, pod.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s from host definer pod %s: %v", path, pod.Name, err)
	}
	return resp.StatusCode, string(body)
}
