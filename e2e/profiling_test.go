package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/runtime/component"
	"hostpath.dev/e2e/framework"
)

// TestProfiling: the host definer serves Go's profiles on its health port
// only with --profiling (the provisioner shares the same flag and package),
// and, like /metrics, only to callers allowed get on the path: without the
// flag /debug/pprof/ is 404; with it a heap profile and the command line
// are there for a cluster admin's token, 401 without a token and 403 for
// the PodMonitors' token (get /metrics only), while /healthz still answers.
func TestProfiling(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	serviceAccount(ctx, t, e.f, e.ns, "profiler")
	bindClusterRole(ctx, t, e.f, e.ns, "profiler", "cluster-admin")
	admin, err := e.f.ServiceAccountToken(ctx, e.ns, "profiler")
	if err != nil {
		t.Fatal(err)
	}
	pod := e.hostDefinerPod(ctx, t, false)
	if code, body := e.pprofGet(ctx, t, pod, "/debug/pprof/", admin); code != http.StatusNotFound {
		t.Fatalf("GET /debug/pprof/ without --profiling = %d %.200q, want 404", code, body)
	}

	e.setHostDefinerArg(ctx, t, "--profiling")
	pod = e.hostDefinerPod(ctx, t, true)
	scraper := metricsToken(ctx, t, e.f)
	for _, tc := range []struct {
		path, token string
		wantCode    int
		want        string
	}{
		{"/debug/pprof/heap?debug=1", admin, http.StatusOK, "heap profile:"},
		{"/debug/pprof/cmdline", admin, http.StatusOK, "--profiling"},
		{"/debug/pprof/cmdline", "", http.StatusUnauthorized, "no bearer token"},
		{"/debug/pprof/cmdline", scraper, http.StatusForbidden, "cannot get path"},
		{"/healthz", "", http.StatusOK, "ok"},
	} {
		if code, body := e.pprofGet(ctx, t, pod, tc.path, tc.token); code != tc.wantCode || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s with --profiling = %d %.200q, want %d with %q", tc.path, code, body, tc.wantCode, tc.want)
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
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if component.PodServing(p) && p.Status.PodIP != "" && slices.Contains(p.Spec.Containers[0].Args, "--profiling") == profiling {
				found = p
				return true, nil
			}
			seen = append(seen, fmt.Sprintf("%s (%s, serving %v, --profiling %v)", p.Name, p.Status.Phase, component.PodServing(p), slices.Contains(p.Spec.Containers[0].Args, "--profiling")))
		}
		return false, fmt.Errorf("host definer pods: %v", seen)
	})
	return found
}

// pprofGet returns the status and body of GET path on pod's health port,
// sent with token ("" for none).
func (e *hdEnv) pprofGet(ctx context.Context, t *testing.T, pod *corev1.Pod, path, token string) (int, string) {
	t.Helper()
	return scrape(ctx, t, "http://"+net.JoinHostPort(pod.Status.PodIP, "8081")+path, token)
}
