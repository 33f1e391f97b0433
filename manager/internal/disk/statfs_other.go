//go:build !linux

package disk

import (
	"errors"
	"os"
)

func statfs(*os.File) (fsStats, error) {
	return fsStats{}, errors.New("filesystem statistics are only read on Linux")
}
