package v1

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

func TestVolumeDirectoryOf(t *testing.T) {
	pv := func(a map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: a}}
	}
	multihost := map[string]string{
		storagehelpers.AnnDynamicallyProvisioned: DefaultProvisionerName, AnnotationMode: ModeMultihost,
		AnnotationPool: "default", AnnotationDirectory: "dir", AnnotationNodes: "a, b", AnnotationPendingNodes: "c",
	}
	node := map[string]string{
		storagehelpers.AnnDynamicallyProvisioned: DefaultProvisionerName, AnnotationMode: ModeNode,
		AnnotationPool: "default", AnnotationDirectory: "dir", AnnotationNode: "a",
	}
	without := func(a map[string]string, key string) map[string]string {
		out := map[string]string{}
		for k, v := range a {
			if k != key {
				out[k] = v
			}
		}
		return out
	}
	with := func(a map[string]string, key, value string) map[string]string {
		out := without(a, key)
		out[key] = value
		return out
	}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want VolumeDirectory
		ok   bool
		// holders; on and listed: nodes that On and Listed report true
		// for, of a, b, c, d and "".
		holders, on, listed []string
	}{
		{name: "multihost", pv: pv(multihost), ok: true,
			want:    VolumeDirectory{Pool: "default", Directory: "dir", Multihost: true, Nodes: []string{"a", "b"}, PendingNodes: []string{"c"}},
			holders: []string{"a", "b"}, on: []string{"a", "b"}, listed: []string{"a", "b", "c"}},
		{name: "node mode", pv: pv(node), ok: true, want: VolumeDirectory{Pool: "default", Directory: "dir", Node: "a"},
			holders: []string{"a"}, on: []string{"a"}, listed: []string{"a"}},
		{name: "no mode counts as node", pv: pv(without(node, AnnotationMode)), ok: true, want: VolumeDirectory{Pool: "default", Directory: "dir", Node: "a"},
			holders: []string{"a"}, on: []string{"a"}, listed: []string{"a"}},
		{name: "node mode without a node", pv: pv(without(node, AnnotationNode)), ok: true, want: VolumeDirectory{Pool: "default", Directory: "dir"}},
		{name: "capacity-aware name", pv: pv(with(multihost, storagehelpers.AnnDynamicallyProvisioned, CapacityProvisionerName)), ok: true,
			want:    VolumeDirectory{Pool: "default", Directory: "dir", Multihost: true, Nodes: []string{"a", "b"}, PendingNodes: []string{"c"}},
			holders: []string{"a", "b"}, on: []string{"a", "b"}, listed: []string{"a", "b", "c"}},
		{name: "unknown mode", pv: pv(with(node, AnnotationMode, "weird"))},
		{name: "another provisioner", pv: pv(with(multihost, storagehelpers.AnnDynamicallyProvisioned, "other"))},
		{name: "no provisioner", pv: pv(without(node, storagehelpers.AnnDynamicallyProvisioned))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := VolumeDirectoryOf(tc.pv, NewProvisionerNames(DefaultProvisionerName))
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("VolumeDirectoryOf() = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if m, mok := MultihostDirectoryOf(tc.pv, NewProvisionerNames(DefaultProvisionerName)); mok != (tc.ok && tc.want.Multihost) || mok && !reflect.DeepEqual(m, tc.want) {
				t.Errorf("MultihostDirectoryOf() = %+v, %v", m, mok)
			}
			if h := got.Holders(); !slices.Equal(h, tc.holders) {
				t.Errorf("Holders() = %v, want %v", h, tc.holders)
			}
			for _, n := range []string{"a", "b", "c", "d", ""} {
				if got.On(n) != slices.Contains(tc.on, n) || got.Listed(n) != slices.Contains(tc.listed, n) {
					t.Errorf("On(%q) = %v, Listed(%q) = %v; want %v, %v", n, got.On(n), n, got.Listed(n), slices.Contains(tc.on, n), slices.Contains(tc.listed, n))
				}
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

// TestWireNames pins the keys existing objects carry: they are spelled
// here on purpose, so that renaming a constant breaks a test instead of
// every PV, claim and class already in a cluster.
func TestWireNames(t *testing.T) {
	for got, want := range map[string]string{
		AnnotationProvisionOnNode:         "hostpath.dev/provision-on-node",
		AnnotationKubevirtProvisionOnNode: "kubevirt.io/provisionOnNode",
		AnnotationReuseDirectory:          "hostpath.dev/reuse-directory",
		AnnotationNode:                    "hostpath.dev/node",
		AnnotationClaimNamespace:          "hostpath.dev/claim-namespace",
		AnnotationClaimName:               "hostpath.dev/claim-name",
		AnnotationPool:                    "hostpath.dev/pool",
		AnnotationDirectory:               "hostpath.dev/directory",
		AnnotationMode:                    "hostpath.dev/mode",
		AnnotationNodes:                   "hostpath.dev/nodes",
		AnnotationPendingNodes:            "hostpath.dev/pending-nodes",
		AnnotationSizeEnforcement:         "hostpath.dev/size-enforcement",
		AnnotationSizeUsed:                "hostpath.dev/size-used",
		AnnotationHealth:                  "hostpath.dev/health",
		AnnotationNodeGoneSince:           "hostpath.dev/node-gone-since",
		AnnotationRecordedPolicy:          "hostpath.dev/recorded-reclaim-policy",
		FinalizerDirectoryProtection:      "hostpath.dev/directory-protection",
		LabelManager:                      "hostpath.dev/manager",
		ModeNode:                          "node",
		ModeMultihost:                     "multihost",
		EnforcementNone:                   "none",
		HealthPoolMissing:                 "PoolMissing",
		HealthDirectoryMissing:            "DirectoryMissing",
		HealthPoolReadOnly:                "PoolReadOnly",
		HealthUsageHigh:                   "UsageHigh",
		ParamPool:                         "pool",
		ParamDirMode:                      "dirMode",
		ParamEnforceSize:                  "enforceSize",
		ParamMode:                         "mode",
	} {
		if got != want {
			t.Errorf("a key is %q, want %q", got, want)
		}
	}
}
