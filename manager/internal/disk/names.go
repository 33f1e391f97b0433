package disk

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"hostpath.dev/api/managerapi"
)

// The name and owner rules are the API's (api/managerapi), so that
// callers check exactly what the Store enforces. These wrappers turn the
// rules' errors into *client.Error values with reason BadRequest.

// ValidateVolumeName is client.ValidateVolumeName with reason BadRequest.
func ValidateVolumeName(name string) error { return badRequest(managerapi.ValidateVolumeName(name)) }

// ValidatePoolName is client.ValidatePoolName with reason BadRequest.
func ValidatePoolName(name string) error { return badRequest(managerapi.ValidatePoolName(name)) }

func validateOwner(owner string) error { return badRequest(managerapi.ValidateOwner(owner)) }

func badRequest(err error) error {
	if err == nil {
		return nil
	}
	return badRequestf("%s", err)
}

// validateClaimName checks a create's claimName: "" (none) or a claim
// name (a DNS subdomain, at most 253 characters), else BadRequest.
func validateClaimName(name string) error {
	if name == "" {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return badRequestf("claimName %q is not a PersistentVolumeClaim name: %s", name, strings.Join(errs, "; "))
	}
	return nil
}
