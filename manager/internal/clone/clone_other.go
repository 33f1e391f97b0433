//go:build !linux

package clone

import (
	"context"
	"errors"
	"os"
)

// errNotLinux is returned off Linux.
var errNotLinux = errors.New("volume clones are implemented on Linux only")

// Contents fails: volume clones are implemented on Linux only.
func Contents(context.Context, *os.Root, *os.Root, Options) (Method, error) {
	return "", errNotLinux
}

// Size fails: volume clones are implemented on Linux only.
func Size(context.Context, *os.Root, Limits) (int64, error) { return 0, errNotLinux }
