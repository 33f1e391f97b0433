package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// componentLogLines is how much of each component log DumpOnFailure prints.
const componentLogLines = 40

// DumpOnFailure logs, for a failed test, the events of namespaces and of
// SystemNamespace, the state and logs of the pods in those namespaces, and the
// tail of every component log in .cluster/logs.
func (f *Framework) DumpOnFailure(ctx context.Context, t testing.TB, namespaces ...string) {
	t.Helper()
	f.dump(ctx, t, "Diagnostics after failure", namespaces...)
}

// restoresDumped holds the tests whose diagnostics dumpBeforeRestore
// already logged.
var restoresDumped sync.Map // testing.TB → struct{}

// dumpBeforeRestore logs, for a failed test, the product's diagnostics
// before the first of its SetArgs restores rolls the pods: the
// namespace's dump (Namespace) runs after the restores (cleanups run last
// registered first), when the pods that failed and their logs are gone.
// It logs them once per test; the namespace's dump still follows.
func (f *Framework) dumpBeforeRestore(t testing.TB, w Workload) {
	t.Helper()
	if !t.Failed() {
		return
	}
	if _, done := restoresDumped.LoadOrStore(t, struct{}{}); done {
		return
	}
	// The test's context may be cancelled by now.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.dump(ctx, t, "Diagnostics after failure, before restoring the arguments of "+w.String())
}

// dump logs, under title, the diagnostics of namespaces and SystemNamespace
// and the tails of the component logs.
func (f *Framework) dump(ctx context.Context, t testing.TB, title string, namespaces ...string) {
	t.Helper()
	var b strings.Builder
	for _, ns := range append(namespaces, SystemNamespace) {
		f.dumpNamespace(ctx, &b, ns)
	}
	f.dumpComponentLogs(&b)
	t.Logf("%s:\n%s", title, b.String())
}

func (f *Framework) dumpNamespace(ctx context.Context, b *strings.Builder, ns string) {
	fmt.Fprintf(b, "=== Events in %s\n", ns)
	events, err := f.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "list events: %v\n", err)
	} else {
		items := events.Items
		sort.Slice(items, func(i, j int) bool { return eventTime(items[i]).Time.Before(eventTime(items[j]).Time) })
		for _, e := range items {
			fmt.Fprintf(b, "%s %s %s/%s %s: %s (x%d)\n", eventTime(e).UTC().Format("15:04:05"), e.Type,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, max(e.Count, 1))
		}
	}
	pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(b, "list pods: %v\n", err)
		return
	}
	for _, p := range pods.Items {
		fmt.Fprintf(b, "=== Pod %s/%s on %q: %s %s\n", ns, p.Name, p.Spec.NodeName, p.Status.Phase, podWaitReasons(&p))
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			for _, previous := range []bool{false, true} {
				raw, err := f.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{
					Container: c.Name, Previous: previous, TailLines: ptr.To[int64](100),
				}).DoRaw(ctx)
				if err != nil {
					if !previous {
						fmt.Fprintf(b, "--- logs of %s: %v\n", c.Name, err)
					}
					continue
				}
				which := "logs"
				if previous {
					which = "logs of the previous run"
				}
				fmt.Fprintf(b, "--- %s of %s:\n%s\n", which, c.Name, bytes.TrimSpace(raw))
			}
		}
	}
}

func (f *Framework) dumpComponentLogs(b *strings.Builder) {
	files, _ := filepath.Glob(filepath.Join(f.ClusterDir, "logs", "*.log"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > componentLogLines {
			lines = lines[len(lines)-componentLogLines:]
		}
		fmt.Fprintf(b, "=== Last %d lines of %s\n%s\n", len(lines), file, strings.Join(lines, "\n"))
	}
}

func eventTime(e corev1.Event) metav1.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	default:
		return e.CreationTimestamp
	}
}
