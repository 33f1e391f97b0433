//go:build !linux

package quota

import (
	"errors"
	"os"
)

// detect enforces nothing: quotas are only implemented on Linux.
func detect(*os.Root, struct{}) Enforcer {
	return notEnforced("volume sizes are enforced on Linux only")
}

// defaultEnv is empty: there is nothing to consult.
func defaultEnv() struct{} { return struct{}{} }

// EnableSimpleQuotas enables btrfs simple quotas on the filesystem of dir;
// it is only implemented on Linux.
func EnableSimpleQuotas(*os.File) error {
	return errors.New("btrfs simple quotas can only be enabled on Linux")
}
