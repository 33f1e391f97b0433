package reclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// EnsureFinalizer adds hostpathv1.FinalizerDirectoryProtection to pv when it lacks it and is
// not being deleted, with one merge patch guarded by pv's resourceVersion (a
// concurrent change fails with a conflict, and the caller looks again). It
// writes nothing otherwise. The caller checks that pv is a node-mode volume
// of its own node.
func EnsureFinalizer(ctx context.Context, c kubernetes.Interface, pv *v1.PersistentVolume, fieldManager string) error {
	if pv.DeletionTimestamp != nil || slices.Contains(pv.Finalizers, hostpathv1.FinalizerDirectoryProtection) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": pv.ResourceVersion,
		"finalizers":      append(slices.Clone(pv.Finalizers), hostpathv1.FinalizerDirectoryProtection),
	}})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	if _, err := c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("add finalizer %s to PersistentVolume %q: %w", hostpathv1.FinalizerDirectoryProtection, pv.Name, err)
	}
	return nil
}

// removeFinalizer removes hostpathv1.FinalizerDirectoryProtection from pv with a JSON patch
// that tests the finalizer is still at the index pv has it at, so the other
// finalizers are kept and a concurrent change fails (and is retried) instead
// of being overwritten. A PV that is already gone is a success.
func removeFinalizer(ctx context.Context, c kubernetes.Interface, pv *v1.PersistentVolume, fieldManager string) error {
	i := slices.Index(pv.Finalizers, hostpathv1.FinalizerDirectoryProtection)
	if i < 0 {
		return nil
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": hostpathv1.FinalizerDirectoryProtection},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from PersistentVolume %q: %w", hostpathv1.FinalizerDirectoryProtection, pv.Name, err)
	}
	return nil
}

// patchAnnotation sets the annotation key of pv to *value, or removes it
// when value is nil (patchMetadata, with no label).
func patchAnnotation(ctx context.Context, c kubernetes.Interface, pv *v1.PersistentVolume, fieldManager, key string, value *string) error {
	return patchMetadata(ctx, c, pv, fieldManager, map[string]*string{key: value}, nil)
}

// patchMetadata sets the annotations and labels of pv to the values given,
// removing those given as nil, with one merge patch that carries pv's UID
// and resourceVersion: a PV made again under the same name is never
// touched, and a concurrent change fails with a conflict (the caller looks
// again). A PV that is gone is a success.
func patchMetadata(ctx context.Context, c kubernetes.Interface, pv *v1.PersistentVolume, fieldManager string, annotations, labels map[string]*string) error {
	meta := map[string]any{"uid": pv.UID, "resourceVersion": pv.ResourceVersion, "annotations": annotations}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotate PersistentVolume %q with %s: %w", pv.Name, strings.Join(slices.Sorted(maps.Keys(annotations)), ", "), err)
	}
	return nil
}

// doFinalizer carries out a step that adds or removes the finalizer of the
// PV of f: ActAddFinalizer, ActRemoveFinalizer, and ActRelease (release).
func (c *Controller) doFinalizer(ctx context.Context, f Facts, step Step) error {
	logger := klog.FromContext(ctx)
	switch step.Action {
	case ActAddFinalizer:
		logger.V(2).Info("Adding the finalizer to a PersistentVolume made without it", "finalizer", hostpathv1.FinalizerDirectoryProtection)
		return EnsureFinalizer(ctx, c.cfg.Client, f.PV, c.cfg.FieldManager)
	case ActRemoveFinalizer:
		if err := removeFinalizer(ctx, c.cfg.Client, f.PV, c.cfg.FieldManager); err != nil {
			return err
		}
		// V(3): the outcome was logged when this instance's Delete
		// reached it (report), a moment before: at --v=2 a volume's
		// deletion is one line, as its creation is.
		logger.V(3).Info("Removed the finalizer; the directory reached its final state here before the library deleted the PersistentVolume",
			"finalizer", hostpathv1.FinalizerDirectoryProtection)
		return nil
	}
	return c.release(ctx, f, step.Outcome)
}

// release lets the PV of f go with its directory in its final state:
// on the Controller's path it removes the finalizer, then reports o; on
// the library's, it reports o and remembers the PV (finishedSet), and the
// library DELETEs it.
func (c *Controller) release(ctx context.Context, f Facts, o outcome) error {
	pv, logger := f.PV, klog.FromContext(ctx)
	if f.Path == ControllerPath {
		if err := removeFinalizer(ctx, c.cfg.Client, pv, c.cfg.FieldManager); err != nil {
			return err
		}
		logger.V(2).Info("Removed the finalizer", "finalizer", hostpathv1.FinalizerDirectoryProtection, "outcome", o.message)
		report(ctx, c.cfg.Recorder, pv, o)
		return nil
	}
	report(ctx, c.cfg.Recorder, pv, o)
	if f.Ours {
		c.finished.add(pv, f.Loc)
	}
	// V(4): report logged the outcome (or recorded it as an event); the
	// finalizer's removal is logged when it happens.
	logger.V(4).Info("The directory reached its final state; the library deletes the PersistentVolume, then the finalizer comes off",
		"finalizer", hostpathv1.FinalizerDirectoryProtection, "outcome", o.message)
	return nil
}
