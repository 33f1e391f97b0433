package app

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/component/componenttest"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr []string // substrings; none for valid
	}{
		{name: "environment fallbacks", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "hostpath-system"}},
		{name: "flags only", args: []string{"--node-name=n1", "--namespace=ns", "--manager-namespace=ns"}},
		{name: "static manager needs no manager namespace", args: []string{"--node-name=n1", "--namespace=ns", "--manager-url=http://127.0.0.1:8080"}},
		{name: "node and namespace required", wantErr: []string{"--node-name (or NODE_NAME) is required", "--namespace (or POD_NAMESPACE) is required", "--manager-namespace"}},
		{
			name:    "bad values",
			env:     map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args:    []string{"--kube-api-qps=0", "--kube-api-burst=0", "--event-qps=-1", "--event-burst=0", "--workers=0", "--metrics-address=8081", "--manager-selector=a==b==c", "--manager-port=70000", "--instance-selector="},
			wantErr: []string{"--kube-api-qps", "--kube-api-burst", "--event-qps must be positive", "--event-burst must be at least 1", "--workers", "--metrics-address", "--manager-selector", "--manager-port", "--instance-selector"},
		},
		{name: "event limits", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--event-qps=5", "--event-burst=10"}},
		{name: "timeouts", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--manager-timeout=5s", "--manager-delete-timeout=1h"}},
		{
			name: "bad timeouts", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--manager-timeout=0", "--manager-delete-timeout=-1s"}, wantErr: []string{"--manager-timeout must be positive", "--manager-delete-timeout must be positive"},
		},
		{name: "usage interval", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--usage-interval=30s"}},
		{name: "usage refresher off", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--usage-interval=0"}},
		{
			name: "negative usage interval", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--usage-interval=-1s"}, wantErr: []string{"--usage-interval must not be negative"},
		},
		{name: "usage warning threshold", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--usage-warning-threshold=80"}},
		{name: "usage warning off", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--usage-warning-threshold=0"}},
		{name: "usage warning when full", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--usage-warning-threshold=100"}},
		{
			name: "usage warning threshold over 100", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--usage-warning-threshold=101"}, wantErr: []string{"--usage-warning-threshold must be a percentage from 0 to 100"},
		},
		{
			name: "negative usage warning threshold", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--usage-warning-threshold=-1"}, wantErr: []string{"--usage-warning-threshold must be a percentage from 0 to 100"},
		},
		{name: "capacity publishing off", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--capacity-interval=0"}},
		{
			name: "negative capacity interval", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--capacity-interval=-1s"}, wantErr: []string{"--capacity-interval must not be negative"},
		},
		{name: "node-gone grace period", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--node-gone-grace-period=24h"}},
		{
			name: "negative node-gone grace period", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--node-gone-grace-period=-1h"}, wantErr: []string{"--node-gone-grace-period must not be negative"},
		},
		{name: "fan-out", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--fanout-workers=2", "--fanout-node-timeout=5s", "--fanout-attempts=1"}},
		{
			name: "bad fan-out", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args:    []string{"--fanout-workers=0", "--fanout-node-timeout=0", "--fanout-attempts=0"},
			wantErr: []string{"--fanout-workers must be at least 1", "--fanout-node-timeout must be positive", "--fanout-attempts must be at least 1"},
		},
		{name: "bad manager URL", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--manager-url=ftp://x"}, wantErr: []string{"--manager-url"}},
		{name: "https manager URL", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--manager-url=https://127.0.0.1:8443", "--manager-ca-file=/ca.crt", "--manager-server-name=m.example"}},
		{name: "HTTPS manager URL without a CA", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--manager-url=HTTPS://127.0.0.1:8443"}, wantErr: []string{"--manager-ca-file is required with an https --manager-url"}},
		{name: "https manager URL without a CA", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--manager-url=https://127.0.0.1:8443"}, wantErr: []string{"--manager-ca-file is required with an https --manager-url"}},
		{name: "CA of a plain manager URL", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args:    []string{"--manager-url=http://127.0.0.1:8080", "--manager-ca-file=/ca.crt", "--manager-server-name=m"},
			wantErr: []string{"--manager-ca-file is only for an https --manager-url", "--manager-server-name is only for an https --manager-url"}},
		{name: "CA without a manager URL", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args: []string{"--manager-ca-file=/ca.crt"}, wantErr: []string{"--manager-ca-file is only for an https --manager-url"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvNodeName, tc.env[EnvNodeName])
			t.Setenv(EnvPodNamespace, tc.env[EnvPodNamespace])
			componenttest.CheckErrs(t, componenttest.Validate(t, NewOptions(), tc.args...), tc.wantErr)
		})
	}
}

// TestDefaults checks the defaults that must match the contract and the
// manager: its HTTPS port, tokens of the manager's audience, the client's
// time limits; and the usage refresher's interval and warning threshold.
func TestDefaults(t *testing.T) {
	o := NewOptions()
	if o.ManagerTokenFile != "/var/run/secrets/hostpath.dev/manager/token" || o.ManagerTokenFile == managerapi.DefaultTokenFile {
		t.Errorf("ManagerTokenFile = %q, want the projected token of audience %s", o.ManagerTokenFile, managerapi.TokenAudience)
	}
	if o.ManagerPort != managerapi.ServingPort {
		t.Errorf("ManagerPort = %d, want the managers' HTTPS port %d", o.ManagerPort, managerapi.ServingPort)
	}
	if o.ManagerTimeout != managerapi.DefaultCallTimeout || o.ManagerDeleteTimeout != managerapi.DefaultDeleteTimeout {
		t.Errorf("timeouts = %s, %s; want %s, %s", o.ManagerTimeout, o.ManagerDeleteTimeout, managerapi.DefaultCallTimeout, managerapi.DefaultDeleteTimeout)
	}
	if o.UsageInterval != time.Minute {
		t.Errorf("UsageInterval = %s, want 1m", o.UsageInterval)
	}
	if o.UsageWarningThreshold != 90 {
		t.Errorf("UsageWarningThreshold = %d, want 90", o.UsageWarningThreshold)
	}
	if o.CapacityInterval != time.Minute {
		t.Errorf("CapacityInterval = %s, want 1m", o.CapacityInterval)
	}
	if o.NodeGoneGracePeriod != 0 {
		t.Errorf("NodeGoneGracePeriod = %s, want 0 (off)", o.NodeGoneGracePeriod)
	}
	componenttest.Parse(t, o, "--manager-timeout=5s", "--manager-delete-timeout=1h", "--usage-interval=0")
	if o.ManagerTimeout != 5*time.Second || o.ManagerDeleteTimeout != time.Hour {
		t.Errorf("timeouts = %s, %s after flags; want 5s, 1h", o.ManagerTimeout, o.ManagerDeleteTimeout)
	}
	if o.UsageInterval != 0 {
		t.Errorf("UsageInterval = %s after --usage-interval=0, want 0", o.UsageInterval)
	}
}

// TestDaemonSetToken checks that the DaemonSet mounts, at the default
// --manager-token-file, a read-only projected token of the manager's audience.
func TestDaemonSetToken(t *testing.T) {
	f, err := os.Open("../../../manifests/base/provisioner/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ds appsv1.DaemonSet
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&ds); err != nil {
		t.Fatal(err)
	}
	dir, file := filepath.Split(DefaultManagerTokenFile)
	var source *v1.ServiceAccountTokenProjection
	for _, vol := range ds.Spec.Template.Spec.Volumes {
		for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
			if m.Name != vol.Name || filepath.Clean(m.MountPath) != filepath.Clean(dir) || !m.ReadOnly || vol.Projected == nil {
				continue
			}
			for _, s := range vol.Projected.Sources {
				if s.ServiceAccountToken != nil && s.ServiceAccountToken.Path == file {
					source = s.ServiceAccountToken
				}
			}
		}
	}
	switch {
	case source == nil:
		t.Fatalf("no read-only projected service account token %q mounted at %s", file, dir)
	case source.Audience != managerapi.TokenAudience:
		t.Errorf("token audience = %q, want %q", source.Audience, managerapi.TokenAudience)
	case source.ExpirationSeconds == nil || *source.ExpirationSeconds != 3600:
		t.Errorf("token expirationSeconds = %v, want 3600", source.ExpirationSeconds)
	}
}

// provisionerRoles are the Roles of manifests/base/provisioner/rbac.yaml.
func provisionerRoles(t *testing.T) []rbacv1.Role {
	t.Helper()
	f, err := os.Open("../../../manifests/base/provisioner/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var roles []rbacv1.Role
	for {
		var role rbacv1.Role
		if err := dec.Decode(&role); err == io.EOF {
			return roles
		} else if err != nil {
			t.Fatal(err)
		}
		if role.Kind == "Role" {
			roles = append(roles, role)
		}
	}
}

// TestRBACCABundle checks that the namespaced Role lets the provisioner
// read the CA bundle ConfigMap, and that one only, as trust.Watch does
// (get, list and watch with a metadata.name field selector).
func TestRBACCABundle(t *testing.T) {
	for _, role := range provisionerRoles(t) {
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "configmaps") {
				if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) ||
					!slices.Equal(r.ResourceNames, []string{managerapi.CABundleConfigMap}) || role.Namespace != "hostpath-system" {
					t.Errorf("Role %s/%s rule %+v; want configmaps get, list, watch of %s only", role.Namespace, role.Name, r, managerapi.CABundleConfigMap)
				}
				return
			}
		}
	}
	t.Errorf("no Role rule for configmaps")
}

// TestCapacityManifests checks that the manifests match the capacity
// publisher: the CSIDriver is named like hostpathv1.CapacityProvisionerName
// and opts into capacity tracking, and the provisioner's Role in its
// namespace covers what the publisher does with csistoragecapacities.
func TestCapacityManifests(t *testing.T) {
	f, err := os.Open("../../../manifests/base/provisioner/csidriver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var driver storagev1.CSIDriver
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&driver); err != nil {
		t.Fatal(err)
	}
	if driver.Name != hostpathv1.CapacityProvisionerName || driver.Spec.StorageCapacity == nil || !*driver.Spec.StorageCapacity {
		t.Errorf("CSIDriver %q, storageCapacity %v; want %q, true", driver.Name, driver.Spec.StorageCapacity, hostpathv1.CapacityProvisionerName)
	}

	want := []string{"get", "list", "watch", "create", "update", "delete"}
	for _, role := range provisionerRoles(t) {
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "csistoragecapacities") {
				if !slices.Equal(rule.APIGroups, []string{"storage.k8s.io"}) || !slices.Equal(rule.Verbs, want) ||
					len(rule.ResourceNames) > 0 || role.Namespace != "hostpath-system" {
					t.Errorf("Role %s/%s rule %+v; want storage.k8s.io csistoragecapacities %v", role.Namespace, role.Name, rule, want)
				}
				return
			}
		}
	}
	t.Errorf("no Role rule for csistoragecapacities")
}
