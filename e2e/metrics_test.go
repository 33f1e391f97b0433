package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
)

// podMonitorCredentials reads manifests/monitoring/podmonitors.yaml and
// returns the Secret (name and key) whose token every PodMonitor sends;
// the test fails unless all of them send the same one, as Bearer.
func podMonitorCredentials(t *testing.T, f *framework.Framework) (name, key string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.RepoRoot, "manifests", "monitoring", "podmonitors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type endpoint struct {
		Port          string `json:"port"`
		Authorization struct {
			Type        string `json:"type"`
			Credentials struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"credentials"`
		} `json:"authorization"`
	}
	var monitors int
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var pm struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Endpoints []endpoint `json:"podMetricsEndpoints"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &pm); err != nil {
			t.Fatalf("podmonitors.yaml: %v", err)
		}
		if pm.Kind != "PodMonitor" {
			continue
		}
		monitors++
		for _, ep := range pm.Spec.Endpoints {
			a := ep.Authorization
			if a.Type != "Bearer" || a.Credentials.Name == "" || a.Credentials.Key == "" || (name != "" && (a.Credentials.Name != name || a.Credentials.Key != key)) {
				t.Fatalf("PodMonitor %s endpoint %s sends %+v; want the same Bearer Secret as the others", pm.Metadata.Name, ep.Port, a)
			}
			name, key = a.Credentials.Name, a.Credentials.Key
		}
	}
	if monitors != 3 {
		t.Fatalf("podmonitors.yaml has %d PodMonitors, want 3", monitors)
	}
	return name, key
}

// metricsToken is the token the PodMonitors send: from the Secret they
// name, in the product's namespace, once the token controller filled it.
func metricsToken(ctx context.Context, t *testing.T, f *framework.Framework) string {
	t.Helper()
	name, key := podMonitorCredentials(t, f)
	var token string
	framework.WaitFor(ctx, t, provisionTimeout, "Secret "+name+" to hold a token", func(ctx context.Context) (bool, error) {
		s, err := f.Client.CoreV1().Secrets(framework.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = string(s.Data[key])
		return token != "", nil
	})
	return token
}

// scrape GETs url with token ("" sends none), coming back after a 429 as
// callManager does, and returns the status and body.
func scrape(ctx context.Context, t *testing.T, url, token string) (int, string) {
	t.Helper()
	code, body := sendPatiently(ctx, t, http.DefaultClient, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err == nil && token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req, err
	})
	return code, string(body)
}

// scrapeOK is scrape that fails the test unless the answer is 200.
func scrapeOK(ctx context.Context, t *testing.T, url, token string) string {
	t.Helper()
	code, body := scrape(ctx, t, url, token)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %.300q, want 200", url, code, body)
	}
	return body
}

// ownReviews is the series of the reviews the PodMonitors' token causes:
// its service account is in the product's namespace, so its reviews take
// the own callers' lane.
const ownReviews = `hostpath_reviews_total{kind="token",lane="own"}`

// TestMetricsNeedToken: the /metrics of the manager and the provisioner on
// each node and of every host definer replica answers 401 without a
// token, 403 to a valid token without get /metrics, and 200 with the
// series of its program to the token the PodMonitors send; /healthz and
// /readyz stay open.
func TestMetricsNeedToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := framework.Cluster()
	nodes := f.TwoRealNodes(ctx, t)
	ns := f.Namespace(ctx, t)
	serviceAccount(ctx, t, f, ns, "stranger")
	stranger, err := f.ServiceAccountToken(ctx, ns, "stranger")
	if err != nil {
		t.Fatal(err)
	}
	token := metricsToken(ctx, t, f)

	type target struct{ what, base, series string }
	var targets []target
	health := strconv.Itoa(managerapi.HealthPort)
	for node, p := range f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, managerSelector, nodes, provisionTimeout) {
		targets = append(targets, target{"manager on " + node, "http://" + net.JoinHostPort(p.Status.PodIP, health), "hostpath_manager_http_requests_total"})
	}
	for node, p := range f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, provisionerSelector, nodes, provisionTimeout) {
		targets = append(targets, target{"provisioner on " + node, "http://" + net.JoinHostPort(p.Status.PodIP, provisionerMetricsPort), ownReviews})
	}
	definers, err := f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: hostdefinerSelector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range definers.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			targets = append(targets, target{"host definer " + p.Name, "http://" + net.JoinHostPort(p.Status.PodIP, "8081"), ownReviews})
		}
	}
	if len(targets) < 2*len(nodes)+1 {
		t.Fatalf("found %d programs to scrape, want at least %d", len(targets), 2*len(nodes)+1)
	}
	for _, tg := range targets {
		for _, c := range []struct {
			desc, path, token string
			want              int
			wantIn            string
		}{
			{"no token", "/metrics", "", http.StatusUnauthorized, "no bearer token"},
			{"junk token", "/metrics", "junk-" + framework.RandomSuffix(), http.StatusUnauthorized, "rejected by TokenReview"},
			{"a token without get /metrics", "/metrics", stranger, http.StatusForbidden, managerapi.MetricsReaderClusterRole},
			{"the PodMonitors' token", "/metrics", token, http.StatusOK, tg.series},
			{"the probe /healthz", "/healthz", "", http.StatusOK, "ok"},
			{"the probe /readyz", "/readyz", "", http.StatusOK, "ok"},
		} {
			code, body := scrape(ctx, t, tg.base+c.path, c.token)
			if code != c.want || !strings.Contains(body, c.wantIn) {
				t.Errorf("%s, %s: GET %s = %d %.200q; want %d containing %q", tg.what, c.desc, c.path, code, body, c.want, c.wantIn)
			}
		}
	}
}
