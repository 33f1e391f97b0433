package managerapi

import (
	"fmt"
	"regexp"
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

// Reclaim policies an owner record may keep.
const (
	// ReclaimDelete: the directory goes with its PersistentVolume.
	ReclaimDelete = "Delete"
	// ReclaimRetain: the directory stays when its PersistentVolume goes.
	ReclaimRetain = "Retain"
)

// ValidateReclaimPolicy reports whether p may be recorded: "", Delete or
// Retain.
func ValidateReclaimPolicy(p string) error {
	switch p {
	case "", ReclaimDelete, ReclaimRetain:
		return nil
	}
	return fmt.Errorf("reclaimPolicy %q is invalid: want %q or %q", p, ReclaimDelete, ReclaimRetain)
}

// ValidateClaimNamespace reports whether ns may be recorded as the
// namespace of a directory's claim: "" (none) or a namespace name (a DNS
// label, at most 63 characters).
func ValidateClaimNamespace(ns string) error {
	return validateOptional(ns, validation.IsDNS1123Label, "claimNamespace %q is not a namespace name: %s")
}

// ValidateClaimName reports whether name may name the claim a request is
// made for (CreateVolumeRequest.ClaimName, SetOwnerRequest.ClaimName): ""
// (none) or a PersistentVolumeClaim name (a DNS subdomain, at most 253
// characters).
func ValidateClaimName(name string) error {
	return validateOptional(name, validation.IsDNS1123Subdomain, "claimName %q is not a PersistentVolumeClaim name: %s")
}

// validateOptional checks an optional field: "" (none) or a value that
// check finds no fault with; else the error that format makes of the
// value and check's faults.
func validateOptional(value string, check func(string) []string, format string) error {
	if value == "" {
		return nil
	}
	if errs := check(value); len(errs) > 0 {
		return fmt.Errorf(format, value, strings.Join(errs, "; "))
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
