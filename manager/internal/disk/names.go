package disk

import "hostpath.dev/manager/pkg/client"

// The name and owner rules are the API's (manager/pkg/client), so that
// callers check exactly what the Store enforces. These wrappers turn the
// rules' errors into *client.Error values with reason BadRequest.

// ValidateVolumeName is client.ValidateVolumeName with reason BadRequest.
func ValidateVolumeName(name string) error { return badRequest(client.ValidateVolumeName(name)) }

// ValidatePoolName is client.ValidatePoolName with reason BadRequest.
func ValidatePoolName(name string) error { return badRequest(client.ValidatePoolName(name)) }

func validateOwner(owner string) error { return badRequest(client.ValidateOwner(owner)) }

func badRequest(err error) error {
	if err == nil {
		return nil
	}
	return badRequestf("%s", err)
}
