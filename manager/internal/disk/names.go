package disk

import (
	"io/fs"

	"hostpath.dev/manager/pkg/client"
)

// The name and mode rules are the API's (manager/pkg/client), so that callers
// check exactly what the Store enforces. These wrappers give their errors the
// kind ErrInvalid.

// MaxVolumeNameLength is client.MaxVolumeNameLength.
const MaxVolumeNameLength = client.MaxVolumeNameLength

// DefaultMode is client.DefaultMode.
const DefaultMode = client.DefaultMode

// ValidateVolumeName is client.ValidateVolumeName, with kind ErrInvalid.
func ValidateVolumeName(name string) error { return invalid(client.ValidateVolumeName(name)) }

// ValidatePoolName is client.ValidatePoolName, with kind ErrInvalid.
func ValidatePoolName(name string) error { return invalid(client.ValidatePoolName(name)) }

// ParseMode is client.ParseMode, with kind ErrInvalid.
func ParseMode(s string) (fs.FileMode, error) {
	m, err := client.ParseMode(s)
	return m, invalid(err)
}

// FormatMode is client.FormatMode.
func FormatMode(m fs.FileMode) string { return client.FormatMode(m) }

func invalid(err error) error {
	if err == nil {
		return nil
	}
	return invalidf("%s", err)
}
