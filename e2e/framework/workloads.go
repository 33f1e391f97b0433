package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Workload names a DaemonSet or a Deployment of SystemNamespace.
type Workload struct {
	// Kind is "DaemonSet" or "Deployment".
	Kind string
	// Name is the object's name.
	Name string
}

// DaemonSet is the Workload of the DaemonSet name.
func DaemonSet(name string) Workload { return Workload{Kind: "DaemonSet", Name: name} }

// Deployment is the Workload of the Deployment name.
func Deployment(name string) Workload { return Workload{Kind: "Deployment", Name: name} }

// String names w in messages.
func (w Workload) String() string { return w.Kind + " " + w.Name }

// Args returns the arguments of container in w.
func (f *Framework) Args(ctx context.Context, w Workload, container string) ([]string, error) {
	var spec *corev1.PodSpec
	switch w.Kind {
	case "DaemonSet":
		ds, err := f.Client.AppsV1().DaemonSets(SystemNamespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		spec = &ds.Spec.Template.Spec
	case "Deployment":
		d, err := f.Client.AppsV1().Deployments(SystemNamespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		spec = &d.Spec.Template.Spec
	default:
		return nil, fmt.Errorf("%s: not a DaemonSet or Deployment", w)
	}
	for _, c := range spec.Containers {
		if c.Name == container {
			return slices.Clone(c.Args), nil
		}
	}
	return nil, fmt.Errorf("%s has no container %q", w, container)
}

// SetArgs gives container of w the arguments edit makes of its current
// ones and waits for the rollout. It returns a function that restores the
// arguments w had (waiting again), which also runs when the test ends
// unless called before; calls for the same workload within a test restore
// the first arguments last. If the test has failed by then, the first
// restore logs the product's diagnostics before it rolls the pods.
func (f *Framework) SetArgs(ctx context.Context, t testing.TB, w Workload, container string, edit func([]string) []string, timeout time.Duration) (restore func()) {
	t.Helper()
	before, err := f.Args(ctx, w, container)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.patchArgs(ctx, w, container, edit(slices.Clone(before)), timeout); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restoresDumped.Delete(t) })
	var once sync.Once
	restore = func() {
		once.Do(func() {
			f.dumpBeforeRestore(t, w)
			cctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := f.patchArgs(cctx, w, container, before, timeout); err != nil {
				t.Errorf("Restore the arguments of %s: %v", w, err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}

// UpdateArgs gives container of w the arguments edit makes of its current
// ones and waits for the rollout, without restoring them at the end (a
// test that called SetArgs for w still gets its first arguments back).
func (f *Framework) UpdateArgs(ctx context.Context, w Workload, container string, edit func([]string) []string, timeout time.Duration) error {
	args, err := f.Args(ctx, w, container)
	if err != nil {
		return err
	}
	return f.patchArgs(ctx, w, container, edit(args), timeout)
}

// patchArgs sets the arguments of container in w and waits until every
// workload of SystemNamespace is rolled out.
func (f *Framework) patchArgs(ctx context.Context, w Workload, container string, args []string, timeout time.Duration) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []map[string]any{{"name": container, "args": args}}}}}})
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{}
	switch w.Kind {
	case "DaemonSet":
		_, err = f.Client.AppsV1().DaemonSets(SystemNamespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, opts)
	case "Deployment":
		_, err = f.Client.AppsV1().Deployments(SystemNamespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, opts)
	default:
		err = errors.New("not a DaemonSet or Deployment")
	}
	if err != nil {
		return fmt.Errorf("patch the arguments of %s: %w", w, err)
	}
	return f.WaitForWorkloads(ctx, SystemNamespace, timeout)
}

// ReplaceArg returns an edit for SetArgs that replaces the argument old by
// new (and fails the test when old is not there).
func ReplaceArg(t testing.TB, old, new string) func([]string) []string {
	return func(args []string) []string {
		i := slices.Index(args, old)
		if i < 0 {
			t.Fatalf("No argument %q in %q", old, args)
		}
		args[i] = new
		return args
	}
}

// AddArgs returns an edit for SetArgs that appends extra.
func AddArgs(extra ...string) func([]string) []string {
	return func(args []string) []string { return append(args, extra...) }
}
