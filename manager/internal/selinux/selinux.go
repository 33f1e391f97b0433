// Package selinux labels the directories the manager creates so that pods
// can use them on hosts where SELinux is enforcing.
//
// Why: under SELinux a process may touch a file only if the policy allows
// its domain to access the file's type. Containers run in a domain such as
// container_t, which may use files of type container_file_t but not the
// var_t or default_t that a directory made under /var or /mnt gets from its
// parent. A hostPath volume whose directory lacks such a type mounts fine
// and then fails every read and write with EACCES. The kubevirt
// hostpath-provisioner leaves this to the administrator (chcon on the pool
// path); the manager instead labels each directory it creates.
//
// How: a Labeler sets the directory's security context, the extended
// attribute security.selinux, through a descriptor of the already-open
// directory (fsetxattr(2)), so no path is resolved and a symlink swapped in
// meanwhile is never followed. New returns a Labeler that does nothing when
// SELinux is disabled on the host, which Enabled detects from selinuxfs
// (/sys/fs/selinux). The context is the full user:role:type:level, by
// default DefaultContext; ValidateContext checks its syntax, not whether the
// loaded policy knows it (the kernel refuses an unknown one when labelling).
//
// A directory already carrying the wanted context is left alone, and so is
// one that the manager may not relabel but that already has the wanted
// type and level (for example after chcon -t container_file_t, which keeps
// the user and role): pods can use it as it is.
package selinux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultContext is the context given to directories by default: the type
// container_file_t, which containers may read and write, at level s0, which
// every container's MCS categories dominate.
const DefaultContext = "system_u:object_r:container_file_t:s0"

// DefaultFS is where selinuxfs is mounted on a host with SELinux enabled.
const DefaultFS = "/sys/fs/selinux"

// xattrName is the extended attribute that holds a file's security context.
const xattrName = "security.selinux"

// A Labeler gives a directory its security context.
type Labeler interface {
	// Label sets the security context of the open file f, through its
	// descriptor (never by path).
	Label(f *os.File) error
}

// Nop is the Labeler of a host without SELinux: it never touches a file.
type Nop struct{}

// Label does nothing.
func (Nop) Label(*os.File) error { return nil }

// New returns the Labeler that gives files context when enabled, and Nop
// otherwise. context should have passed ValidateContext: when enabled, a
// Labeler of an invalid context fails every Label with the validation
// error.
func New(context string, enabled bool) Labeler {
	if !enabled {
		return Nop{}
	}
	return &xattrLabeler{context: context, err: ValidateContext(context)}
}

// xattrLabeler sets security.selinux to context.
type xattrLabeler struct {
	context string
	// err is why context is invalid; nil when it is valid.
	err error
}

// Label sets f's context, unless it already has it (or has its type and
// level and may not be relabelled).
func (l *xattrLabeler) Label(f *os.File) error {
	if l.err != nil {
		return l.err
	}
	if f == nil {
		return errors.New("selinux: no file to label")
	}
	current, _ := getContext(f) // unreadable or absent: set it
	if current == l.context {
		return nil
	}
	err := setContext(f, l.context)
	if err != nil && current != "" && sameTypeAndLevel(current, l.context) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set SELinux context %s on %s (currently %q): %w", l.context, f.Name(), current, err)
	}
	return nil
}

// ValidateContext checks the syntax of a security context:
// user:role:type:level, where the level is a sensitivity optionally
// followed by categories and a range (s0, s0:c1,c2, s0-s0:c0.c1023), with
// no empty part and only printable ASCII without spaces.
func ValidateContext(context string) error {
	if context == "" {
		return errors.New("SELinux context is empty; want user:role:type:level, e.g. " + DefaultContext)
	}
	for _, c := range context {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("SELinux context %q has %q: only printable ASCII without spaces is allowed", context, c)
		}
	}
	parts := strings.SplitN(context, ":", 4)
	if len(parts) < 4 {
		return fmt.Errorf("SELinux context %q has %d parts; want user:role:type:level, e.g. %s", context, len(parts), DefaultContext)
	}
	for i, name := range []string{"user", "role", "type"} {
		if parts[i] == "" {
			return fmt.Errorf("SELinux context %q has an empty %s", context, name)
		}
	}
	for _, p := range strings.Split(parts[3], ":") {
		if p == "" {
			return fmt.Errorf("SELinux context %q has an empty level or category part", context)
		}
	}
	return nil
}

// sameTypeAndLevel reports whether the contexts a and b have the same type
// and level (what type enforcement and MCS check), whatever their user and
// role.
func sameTypeAndLevel(a, b string) bool {
	pa, pb := strings.SplitN(a, ":", 3), strings.SplitN(b, ":", 3)
	return len(pa) == 3 && len(pb) == 3 && pa[2] == pb[2]
}

// Enabled reports whether SELinux is enabled on the host whose selinuxfs
// mount point is fsRoot (DefaultFS): fsRoot is a directory and either a
// selinuxfs mount or holds the file enforce. A container sees the host's
// selinuxfs only when it is mounted in.
func Enabled(fsRoot string) bool {
	fi, err := os.Stat(fsRoot)
	if err != nil || !fi.IsDir() {
		return false
	}
	if isSELinuxFS(fsRoot) {
		return true
	}
	fi, err = os.Stat(filepath.Join(fsRoot, "enforce"))
	return err == nil && fi.Mode().IsRegular()
}

// Mode says whether to label: always, never, or when Enabled.
type Mode string

// The modes, as the manager's --selinux flag takes them.
const (
	ModeAuto Mode = "auto"
	ModeOn   Mode = "on"
	ModeOff  Mode = "off"
)

// ParseMode parses auto, on or off.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeOn, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("SELinux mode %q: want %s, %s or %s", s, ModeAuto, ModeOn, ModeOff)
}

// Enabled reports whether m labels: on yes, off no, auto when SELinux is
// enabled per the selinuxfs at fsRoot.
func (m Mode) Enabled(fsRoot string) bool {
	switch m {
	case ModeOn:
		return true
	case ModeAuto:
		return Enabled(fsRoot)
	}
	return false
}
