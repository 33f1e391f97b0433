package client

import (
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxVolumeNameLength is the longest volume name accepted: the Linux limit
// for one path component (NAME_MAX).
const MaxVolumeNameLength = 255

var (
	volumeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	poolNameRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// ValidateVolumeName reports whether name may name a volume directory. The
// manager enforces it; callers (the provisioner's pathPattern) check it
// before they ask.
//
// A volume name is exactly one path component of 1 to 255 characters from
// [A-Za-z0-9._-] that starts with a letter or digit. So it is never "." or
// "..", never hidden, never absolute, and holds no slash, backslash, NUL,
// percent sign or other character that could be decoded into one of those.
func ValidateVolumeName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("volume name is empty")
	case len(name) > MaxVolumeNameLength:
		return fmt.Errorf("volume name is %d bytes long, the limit is %d", len(name), MaxVolumeNameLength)
	case !volumeNameRE.MatchString(name):
		return fmt.Errorf("volume name %q is invalid: it must be one path component of letters, digits, '.', '_' and '-' that starts with a letter or digit", name)
	}
	return nil
}

// ValidateOwner reports whether name may name the owner of a volume: a
// PersistentVolume name (a DNS subdomain, at most 253 characters).
func ValidateOwner(name string) error {
	if name == "" {
		return fmt.Errorf("owner is empty: name the PersistentVolume the directory is for")
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("owner %q is not a PersistentVolume name: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// ValidatePoolName reports whether name may name a storage pool: a DNS label
// (RFC 1123), 1 to 63 lower-case letters, digits and '-', starting and ending
// with a letter or digit.
func ValidatePoolName(name string) error {
	if !poolNameRE.MatchString(name) {
		return fmt.Errorf("pool name %q is invalid: it must be a DNS label (1-63 lower-case letters, digits and '-', starting and ending with a letter or digit)", name)
	}
	return nil
}

// DefaultMode is the mode of a volume directory when the request names none.
const DefaultMode fs.FileMode = 0o777

// ParseMode parses an octal permission string such as "0777" or "2775" into
// a FileMode with the permission, setuid, setgid and sticky bits. The empty
// string means DefaultMode.
func ParseMode(s string) (fs.FileMode, error) {
	if s == "" {
		return DefaultMode, nil
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if len(s) > 5 || err != nil || v > 0o7777 {
		return 0, fmt.Errorf("mode %q is invalid: want an octal number from 0 to 07777", s)
	}
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// FormatMode renders the permission, setuid, setgid and sticky bits of m in
// octal with a leading zero, e.g. "0777" or "02775": the inverse of
// ParseMode.
func FormatMode(m fs.FileMode) string {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("0%03o", v)
}
