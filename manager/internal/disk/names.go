package disk

import (
	"io/fs"

	"hostpath.dev/manager/pkg/client"
)

// The name, owner and mode rules are the API's (manager/pkg/client), so that
// callers check exactly what the Store enforces. These wrappers turn the
// rules' errors into *client.Error values with reason BadRequest.

// ValidateVolumeName is client.ValidateVolumeName with reason BadRequest.
func ValidateVolumeName(name string) error { return badRequest(client.ValidateVolumeName(name)) }

// ValidatePoolName is client.ValidatePoolName with reason BadRequest.
func ValidatePoolName(name string) error { return badRequest(client.ValidatePoolName(name)) }

// ParseMode is client.ParseMode with reason BadRequest.
func ParseMode(s string) (fs.FileMode, error) {
	m, err := client.ParseMode(s)
	return m, badRequest(err)
}

func validateOwner(owner string) error { return badRequest(client.ValidateOwner(owner)) }

func badRequest(err error) error {
	if err == nil {
		return nil
	}
	return badRequestf("%s", err)
}
