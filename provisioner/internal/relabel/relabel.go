// Package relabel is the upgrade step of the watches by node: it gives the
// watch label hostpathv1.LabelNode to the PersistentVolumes of hostpath
// made before the label existed, so that the instances, which ask the API
// server only for the PVs their label selects (hostpathv1.WatchSelector),
// see them.
//
// Each instance runs it once at start, before its PV cache first lists
// (package app's cachetrim: the informer's list waits for it): it lists
// the PVs without the label (hostpathv1.UnlabelledSelector, served from
// the API server's watch cache, page by page) and labels, with one patch
// each, the node-mode PVs of its own node and the multihost PVs it is
// elected for (Instances.Elected, the PV's UID). A node-mode PV of another
// node is that node's instance's to label when it starts; if its Node is
// gone, the node-gone scan marks it, which labels it NodeGone (package
// reclaim). Other provisioners' PVs are left as they are. Once every
// instance has run it, the list returns only other provisioners' PVs, and
// nothing is written.
package relabel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/responsibility"
)

// Config is what Volumes needs.
type Config struct {
	// Client reaches the API server.
	Client kubernetes.Interface
	// Names are the provisioner names of the installation.
	Names hostpathv1.ProvisionerNames
	// Node is the instance's node.
	Node string
	// Instances elect the instance that labels an object of no single
	// node (and, for claims, of a node that runs no instance).
	Instances responsibility.Instances
	// FieldManager names the writer of the patches.
	FieldManager string
}

// pageSize is the number of objects per page of a list.
const pageSize = 500

// Volumes labels the unlabelled PVs of this instance (see the package
// doc) and returns how many it labelled, and the errors of the list and
// the patches joined; it labels what it can.
func Volumes(ctx context.Context, cfg Config) (int, error) {
	n, err := eachUnlabelled(ctx, "PersistentVolumes", func(opts metav1.ListOptions) (runtime.Object, error) {
		return cfg.Client.CoreV1().PersistentVolumes().List(ctx, opts)
	}, func(pv *v1.PersistentVolume) (bool, error) {
		mine, err := cfg.labels(pv)
		if err != nil || !mine {
			return false, err
		}
		return true, patchLabel(ctx, cfg.Client, pv, cfg.FieldManager)
	})
	if n > 0 {
		klog.FromContext(ctx).Info("Labelled the PersistentVolumes made before the watch label", "label", hostpathv1.LabelNode, "labelled", n)
	}
	return n, err
}

// eachUnlabelled lists the objects of one kind (what, for errors) without
// the watch label, from the API server's watch cache page by page, and
// passes each to label, which reports whether it labelled it; it returns
// how many were labelled and the errors of the list and of label joined.
func eachUnlabelled[T any, P interface {
	*T
	runtime.Object
}](ctx context.Context, what string, page func(metav1.ListOptions) (runtime.Object, error), label func(P) (bool, error)) (int, error) {
	list := pager.New(pager.SimplePageFunc(page))
	list.PageSize = pageSize
	var (
		labelled int
		errs     []error
	)
	err := list.EachListItemWithAlloc(ctx, metav1.ListOptions{LabelSelector: hostpathv1.UnlabelledSelector().String(), ResourceVersion: "0"},
		func(obj runtime.Object) error {
			o, ok := obj.(P)
			if !ok {
				return nil
			}
			done, err := label(o)
			if err != nil {
				errs = append(errs, err)
			} else if done {
				labelled++
			}
			return nil
		})
	if err != nil {
		errs = append(errs, fmt.Errorf("list the %s without the label %s: %w", what, hostpathv1.LabelNode, err))
	}
	return labelled, errors.Join(errs...)
}

// labels reports whether this instance labels pv: a node-mode PV of
// hostpath on its node, or a multihost one it is elected for.
func (cfg Config) labels(pv *v1.PersistentVolume) (bool, error) {
	d, ok := hostpathv1.VolumeDirectoryOf(pv, cfg.Names)
	switch {
	case !ok:
		return false, nil
	case !d.Multihost:
		return d.Node == cfg.Node, nil
	}
	elected, err := cfg.Instances.Elected(string(pv.UID))
	if err != nil {
		return false, fmt.Errorf("elect the instance that labels PersistentVolume %q: %w", pv.Name, err)
	}
	return elected, nil
}

// patchLabel sets the watch label of pv (hostpathv1.VolumeNodeLabel) with
// a merge patch that carries its UID, so that a PV made again under the
// same name is not touched; a PV that is gone, or a conflict (the PV made
// again), is left.
func patchLabel(ctx context.Context, c kubernetes.Interface, pv *v1.PersistentVolume, fieldManager string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":    pv.UID,
		"labels": map[string]string{hostpathv1.LabelNode: hostpathv1.VolumeNodeLabel(pv)},
	}})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = c.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("label PersistentVolume %q with %s: %w", pv.Name, hostpathv1.LabelNode, err)
	}
	return nil
}
