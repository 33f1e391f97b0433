package managerapi

import (
	"fmt"
	"io/fs"
	"strconv"
)

// A volume directory's mode travels in the API as octal text
// (CreateVolumeRequest.Mode, Volume.Mode): the permission bits and the
// setuid, setgid and sticky bits, nothing else.

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
