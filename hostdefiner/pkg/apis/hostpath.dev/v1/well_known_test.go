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
		{name: "capacity-aware name", pv: pv(map[string]string{AnnotationProvisionedBy: CapacityProvisionerName, AnnotationMode: ModeMultihost, AnnotationPool: "p", AnnotationDirectory: "d"}), ok: true,
			want: MultihostDirectory{Pool: "p", Directory: "d"}},
		{name: "another provisioner", pv: pv(map[string]string{AnnotationProvisionedBy: "other", AnnotationMode: ModeMultihost})},
		{name: "no provisioner", pv: pv(map[string]string{AnnotationMode: ModeMultihost})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MultihostDirectoryOf(tc.pv, NewProvisionerNames(DefaultProvisionerName))
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MultihostDirectoryOf() = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestProvisionerNames(t *testing.T) {
	tests := []struct {
		name       string
		names      ProvisionerNames
		has        map[string]bool
		first      string
		additional []string
		text       string
	}{
		{name: "default", names: NewProvisionerNames(DefaultProvisionerName),
			has:   map[string]bool{DefaultProvisionerName: true, CapacityProvisionerName: true, "": false, "other": false, "hostpath.dev/": false},
			first: DefaultProvisionerName, additional: []string{CapacityProvisionerName}, text: "hostpath.dev/provisioner, hostpath.dev"},
		{name: "configured otherwise", names: NewProvisionerNames("example.com/hp"),
			has:   map[string]bool{"example.com/hp": true, CapacityProvisionerName: true, DefaultProvisionerName: false},
			first: "example.com/hp", additional: []string{CapacityProvisionerName}, text: "example.com/hp, hostpath.dev"},
		{name: "configured as the capacity name", names: NewProvisionerNames(CapacityProvisionerName),
			has:   map[string]bool{CapacityProvisionerName: true, DefaultProvisionerName: false},
			first: CapacityProvisionerName, text: "hostpath.dev"},
		{name: "zero value", has: map[string]bool{CapacityProvisionerName: false, DefaultProvisionerName: false, "": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for name, want := range tc.has {
				if got := tc.names.Has(name); got != want {
					t.Errorf("Has(%q) = %v, want %v", name, got, want)
				}
			}
			if got := tc.names.Name(); got != tc.first {
				t.Errorf("Name() = %q, want %q", got, tc.first)
			}
			if got := tc.names.Additional(); !reflect.DeepEqual(got, tc.additional) {
				t.Errorf("Additional() = %q, want %q", got, tc.additional)
			}
			if got := tc.names.String(); got != tc.text {
				t.Errorf("String() = %q, want %q", got, tc.text)
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
