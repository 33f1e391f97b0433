package resize

import (
	"io"
	"os"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// TestRBAC checks that the provisioner's ClusterRole allows the writes of
// the Controller: patches of PVs and of the status of claims.
func TestRBAC(t *testing.T) {
	f, err := os.Open("../../../manifests/base/provisioner/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	need := map[string]bool{"persistentvolumes": false, "persistentvolumeclaims/status": false}
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if role.Kind != "ClusterRole" || role.Name != "hostpath-provisioner" {
			continue
		}
		for _, r := range role.Rules {
			if !slices.Contains(r.APIGroups, "") || !slices.Contains(r.Verbs, "patch") {
				continue
			}
			for resource := range need {
				if slices.Contains(r.Resources, resource) {
					need[resource] = true
				}
			}
		}
	}
	for resource, ok := range need {
		if !ok {
			t.Errorf("the ClusterRole hostpath-provisioner does not allow patch of %s", resource)
		}
	}
}
