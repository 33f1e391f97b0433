package disk

import (
	"io/fs"

	"hostpath.dev/api/managerapi"
)

// The rules of what a call may be given are the API's (api/managerapi:
// the name rules, and one Validate per request body, which the server's
// parser calls too), so that callers check exactly what the Store
// enforces (see the package doc). These wrappers turn the rules' errors
// into *managerapi.Error values with reason BadRequest, and check the
// mode, a parameter of the Store's, which the server parsed from the
// body.

// ValidateVolumeName is managerapi.ValidateVolumeName with reason
// BadRequest.
func ValidateVolumeName(name string) error { return badRequest(managerapi.ValidateVolumeName(name)) }

// ValidatePoolName is managerapi.ValidatePoolName with reason BadRequest.
func ValidatePoolName(name string) error { return badRequest(managerapi.ValidatePoolName(name)) }

func validateOwner(owner string) error { return badRequest(managerapi.ValidateOwner(owner)) }

// checkVolumeNames checks the name of a pool and of a volume in it
// (BadRequest).
func checkVolumeNames(poolName, name string) error {
	if err := managerapi.ValidatePoolName(poolName); err != nil {
		return badRequest(err)
	}
	return badRequest(managerapi.ValidateVolumeName(name))
}

// checkCreate checks a create's request as the API says
// (managerapi.CreateVolumeRequest.Validate) and its mode (checkMode):
// else BadRequest.
func checkCreate(req managerapi.CreateVolumeRequest, mode fs.FileMode) error {
	if _, err := req.Validate(); err != nil {
		return badRequest(err)
	}
	return checkMode(mode)
}

// checkClone is checkCreate for the clone req into the volume name of
// pool poolName (managerapi.CloneVolumeRequest.Validate).
func checkClone(poolName, name string, req managerapi.CloneVolumeRequest, mode fs.FileMode) error {
	if _, err := req.Validate(poolName, name); err != nil {
		return badRequest(err)
	}
	return checkMode(mode)
}

// checkMode refuses a mode with bits other than the permission, setuid,
// setgid and sticky bits (BadRequest).
func checkMode(mode fs.FileMode) error {
	if mode&^(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		return badRequestf("mode %v has bits other than permissions, setuid, setgid and sticky", mode)
	}
	return nil
}
