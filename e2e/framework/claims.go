package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Claim is a claim of size (1Mi, 1Gi) in class with one access mode.
func Claim(ns, name, class, size string, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(size),
			}},
		},
	}
}

// WaitForClaimBound waits until the claim ns/name is Bound and returns it
// with its PV; on timeout it fails the test with the claim's phase and
// events.
func (f *Framework) WaitForClaimBound(ctx context.Context, t testing.TB, ns, name string, timeout time.Duration) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	WaitFor(ctx, t, timeout, "claim "+ns+"/"+name+" to be Bound", func(ctx context.Context) (bool, error) {
		c, err := f.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pvc = c
		if c.Status.Phase != corev1.ClaimBound {
			return false, fmt.Errorf("claim is %s; events: %s", c.Status.Phase, f.EventReasons(ctx, ns, "PersistentVolumeClaim", name))
		}
		return true, nil
	})
	pv, err := f.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get the PV of %s/%s: %v", ns, name, err)
	}
	return pvc, pv
}

// EventReasons lists the types, reasons and messages of the events about
// the object kind ns/name, oldest first (the error's text if it cannot).
func (f *Framework) EventReasons(ctx context.Context, ns, kind, name string) string {
	list, err := f.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name,
	})
	if err != nil {
		return err.Error()
	}
	s := ""
	for _, e := range list.Items {
		s += fmt.Sprintf("[%s %s: %s] ", e.Type, e.Reason, e.Message)
	}
	if s == "" {
		return "none"
	}
	return s
}
