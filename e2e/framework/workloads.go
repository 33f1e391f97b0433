package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DaemonSetArgs returns the arguments of container in the DaemonSet name of
// SystemNamespace.
func (f *Framework) DaemonSetArgs(ctx context.Context, name, container string) ([]string, error) {
	ds, err := f.Client.AppsV1().DaemonSets(SystemNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == container {
			return slices.Clone(c.Args), nil
		}
	}
	return nil, fmt.Errorf("DaemonSet %s has no container %q", name, container)
}

// SetDaemonSetArgs gives container of the DaemonSet name of SystemNamespace
// the arguments edit makes of its current ones, waits for the rollout, and
// restores the arguments it had (waiting again) when the test ends. Calls
// for the same DaemonSet within a test restore the first arguments.
func (f *Framework) SetDaemonSetArgs(ctx context.Context, t testing.TB, name, container string, edit func([]string) []string, timeout time.Duration) {
	t.Helper()
	before, err := f.DaemonSetArgs(ctx, name, container)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.patchDaemonSetArgs(ctx, name, container, edit(slices.Clone(before)), timeout); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := f.patchDaemonSetArgs(cctx, name, container, before, timeout); err != nil {
			t.Errorf("Restore the arguments of DaemonSet %s: %v", name, err)
		}
	})
}

// UpdateDaemonSetArgs gives container of the DaemonSet name the arguments
// edit makes of its current ones and waits for the rollout, without
// restoring them at the end (a test that called SetDaemonSetArgs for the
// DaemonSet still gets its first arguments back).
func (f *Framework) UpdateDaemonSetArgs(ctx context.Context, name, container string, edit func([]string) []string, timeout time.Duration) error {
	args, err := f.DaemonSetArgs(ctx, name, container)
	if err != nil {
		return err
	}
	return f.patchDaemonSetArgs(ctx, name, container, edit(args), timeout)
}

// patchDaemonSetArgs sets the arguments of container and waits until every
// workload of SystemNamespace is rolled out.
func (f *Framework) patchDaemonSetArgs(ctx context.Context, name, container string, args []string, timeout time.Duration) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []map[string]any{{"name": container, "args": args}}}}}})
	if err != nil {
		return err
	}
	if _, err := f.Client.AppsV1().DaemonSets(SystemNamespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch the arguments of DaemonSet %s: %w", name, err)
	}
	return f.WaitForWorkloads(ctx, SystemNamespace, timeout)
}

// ReplaceArg returns an edit for SetDaemonSetArgs that replaces the
// argument old by new (and fails the test when old is not there).
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

// AddArgs returns an edit for SetDaemonSetArgs that appends extra.
func AddArgs(extra ...string) func([]string) []string {
	return func(args []string) []string { return append(args, extra...) }
}
