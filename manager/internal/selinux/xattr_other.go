//go:build !linux

package selinux

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("SELinux labels are only set on Linux")

func setContext(*os.File, string) error { return errUnsupported }

func getContext(*os.File) (string, error) { return "", errUnsupported }

func isSELinuxFS(string) bool { return false }
