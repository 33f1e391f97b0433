package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

const podTimeout = 2 * time.Minute

// TestSmoke checks what the other tests rely on: every real node has its own
// /var/hpvolumes, pods reach pods on other nodes directly and through a
// Service, and pods reach the API server through the kubernetes Service.
func TestSmoke(t *testing.T) {
	t.Parallel()
	f := framework.Cluster()
	ctx := t.Context()
	nodes := f.TwoRealNodes(ctx, t)
	ns := f.Namespace(ctx, t)

	t.Run("hostPath is per node", func(t *testing.T) {
		dir := path.Join(localcluster.PoolPath, "smoke-"+framework.RandomSuffix())
		for _, node := range nodes {
			t.Cleanup(func() {
				if d, err := f.NodeDir(node, dir); err == nil {
					_ = os.RemoveAll(d)
				}
			})
			pod := framework.TestToolsPod(ns, "writer-"+node, node,
				`echo "written on $NODE_NAME" > /out/$NODE_NAME.txt`)
			pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
			pod.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
			if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatalf("Create pod: %v", err)
			}
		}
		for _, node := range nodes {
			f.WaitForPodSucceeded(ctx, t, ns, "writer-"+node, podTimeout)
		}
		for _, node := range nodes {
			for _, writer := range nodes {
				file := f.MustNodeDir(t, node, path.Join(dir, writer+".txt"))
				data, err := os.ReadFile(file)
				switch {
				case writer == node && err != nil:
					t.Errorf("The file of the pod on %s is not in its node's folder: %v", node, err)
				case writer == node && strings.TrimSpace(string(data)) != "written on "+node:
					t.Errorf("%s holds %q, want %q", file, data, "written on "+node)
				case writer != node && !errors.Is(err, fs.ErrNotExist):
					t.Errorf("The file of the pod on %s shows up in the folder of %s (%s): err=%v", writer, node, file, err)
				}
			}
		}
	})

	t.Run("network", func(t *testing.T) {
		client, server := nodes[0], nodes[1]
		text := "hello from " + server
		web := framework.TestToolsPod(ns, "web", server, "nettool", "serve", ":8080", text)
		web.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}
		if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Create pod: %v", err)
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}},
			},
		}
		svc, err := f.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("Create service: %v", err)
		}
		webPod := f.WaitForPodRunning(ctx, t, ns, "web", podTimeout)

		const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
		api := "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
		script := strings.Join([]string{
			"set -e",
			"echo '== pod IP'", fmt.Sprintf("nettool get --retry-for 60s http://%s:8080/", webPod.Status.PodIP),
			"echo '== service'", fmt.Sprintf("nettool get --retry-for 60s http://%s/", svc.Spec.ClusterIP),
			"echo '== api version'", fmt.Sprintf("nettool get --retry-for 60s --ca-file %s/ca.crt --token-file %s/token %s/version", sa, sa, api),
			"echo '== api with token'", fmt.Sprintf("nettool get --ca-file %s/ca.crt --token-file %s/token %s/api", sa, sa, api),
			"echo '== api without token'", fmt.Sprintf("rc=0; nettool get --ca-file %s/ca.crt %s/api || rc=$?; echo \"exit $rc\"", sa, api),
		}, "\n")
		if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, framework.TestToolsPod(ns, "client", client, script), metav1.CreateOptions{}); err != nil {
			t.Fatalf("Create pod: %v", err)
		}
		f.WaitForPodSucceeded(ctx, t, ns, "client", podTimeout)
		logs, err := f.PodLogs(ctx, ns, "client", "")
		if err != nil {
			t.Fatal(err)
		}
		sections := splitSections(logs)
		for _, want := range []struct{ section, text string }{
			{"pod IP", "STATUS 200\n" + text},
			{"service", "STATUS 200\n" + text},
			{"api version", fmt.Sprintf(`"gitVersion": %q`, f.KubernetesVersion)},
			{"api with token", "STATUS 200"},
			{"api without token", "exit 2"},
		} {
			if !strings.Contains(sections[want.section], want.text) {
				t.Errorf("Section %q of the client's output lacks %q; output:\n%s", want.section, want.text, logs)
			}
		}
		if strings.Contains(sections["api without token"], "STATUS 200") {
			t.Errorf("The API server answered /api without a token; output:\n%s", logs)
		}
	})
}

// splitSections splits output at lines "== NAME" into NAME -> text.
func splitSections(out string) map[string]string {
	sections := map[string]string{}
	name := ""
	for _, line := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(line, "== "); ok {
			name = n
			continue
		}
		sections[name] += line + "\n"
	}
	return sections
}
