package v1

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMultihostDirectoryOf(t *testing.T) {
	pv := func(a map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: a}}
	}
	multihost := map[string]string{
		AnnotationProvisionedBy: DefaultProvisionerName, AnnotationMode: ModeMultihost,
		AnnotationPool: "default", AnnotationDirectory: "dir", AnnotationNodes: "a, b", AnnotationPendingNodes: "c",
	}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want MultihostDirectory
		ok   bool
	}{
		{name: "multihost", pv: pv(multihost), ok: true,
			want: MultihostDirectory{Pool: "default", Directory: "dir", Nodes: []string{"a", "b"}, PendingNodes: []string{"c"}}},
		{name: "node mode", pv: pv(map[string]string{AnnotationProvisionedBy: DefaultProvisionerName, AnnotationMode: ModeNode})},
		{name: "no mode", pv: pv(map[string]string{AnnotationProvisionedBy: DefaultProvisionerName})},
		{name: "another provisioner", pv: pv(map[string]string{AnnotationProvisionedBy: "other", AnnotationMode: ModeMultihost})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MultihostDirectoryOf(tc.pv, DefaultProvisionerName)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MultihostDirectoryOf() = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestVolumePath(t *testing.T) {
	tests := []struct {
		name   string
		source corev1.PersistentVolumeSource
		want   string
	}{
		{name: "hostPath", source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/hpvolumes/d"}}, want: "/var/hpvolumes/d"},
		{name: "local", source: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/var/hpvolumes/d"}}, want: "/var/hpvolumes/d"},
		{name: "another source", source: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/export"}}},
		{name: "none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: tc.source}}
			if got := VolumePath(pv); got != tc.want {
				t.Errorf("VolumePath() = %q, want %q", got, tc.want)
			}
		})
	}
}
