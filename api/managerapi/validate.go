package managerapi

import (
	"errors"
	"fmt"
	"io/fs"
)

// What each request body may hold, checked by one function per request.
// The manager calls each one at both of its doors: its server when it
// parses the body (so that a bad request is answered 400 before it costs
// a slot or a review), and its disk store when the call reaches it (so
// that no caller of the store gets past the rules that the pools'
// confinement rests on). A caller may check a request the same way before
// it sends it. The errors name the field and say what it must be; the
// manager answers them with ReasonBadRequest.

// Validate checks the body of PUT .../volumes/{name}: Owner is a
// PersistentVolume name, ReclaimPolicy "", Delete or Retain,
// ClaimNamespace "" or a namespace name, ClaimName "" or a claim name,
// RequiredBytes not negative, and Mode an octal mode (see ParseMode),
// which it returns.
func (req CreateVolumeRequest) Validate() (fs.FileMode, error) {
	if err := ValidateOwner(req.Owner); err != nil {
		return 0, err
	}
	if err := ValidateReclaimPolicy(req.ReclaimPolicy); err != nil {
		return 0, err
	}
	if err := ValidateClaimNamespace(req.ClaimNamespace); err != nil {
		return 0, err
	}
	if err := ValidateClaimName(req.ClaimName); err != nil {
		return 0, err
	}
	if req.RequiredBytes < 0 {
		return 0, errors.New("requiredBytes must not be negative")
	}
	return ParseMode(req.Mode)
}

// Validate checks the body of PUT .../volumes/{name}/clone for the volume
// name of pool: what CreateVolumeRequest.Validate checks (it returns the
// mode), and the source: SourcePool a pool name, SourceName a volume name
// other than the target's, SourceOwner a PersistentVolume name.
func (req CloneVolumeRequest) Validate(pool, name string) (fs.FileMode, error) {
	mode, err := req.CreateVolumeRequest.Validate()
	if err != nil {
		return 0, err
	}
	if err := ValidatePoolName(req.SourcePool); err != nil {
		return 0, fmt.Errorf("sourcePool: %w", err)
	}
	if err := ValidateVolumeName(req.SourceName); err != nil {
		return 0, fmt.Errorf("sourceName: %w", err)
	}
	if err := ValidateOwner(req.SourceOwner); err != nil {
		return 0, fmt.Errorf("sourceOwner: %w", err)
	}
	if req.SourcePool == pool && req.SourceName == name {
		return 0, errors.New("a volume cannot be cloned into itself")
	}
	return mode, nil
}

// Validate checks the body of PUT .../volumes/{name}/owner: Owner is a
// PersistentVolume name, Previous "" or one, and ReclaimPolicy,
// ClaimNamespace and ClaimName as for CreateVolumeRequest.
func (req SetOwnerRequest) Validate() error {
	if err := ValidateOwner(req.Owner); err != nil {
		return err
	}
	if req.Previous != "" {
		if err := ValidateOwner(req.Previous); err != nil {
			return fmt.Errorf("previous: %w", err)
		}
	}
	if err := ValidateReclaimPolicy(req.ReclaimPolicy); err != nil {
		return err
	}
	if err := ValidateClaimNamespace(req.ClaimNamespace); err != nil {
		return err
	}
	return ValidateClaimName(req.ClaimName)
}

// Validate checks the body of PUT .../volumes/{name}/size: Owner is a
// PersistentVolume name and SizeBytes positive.
func (req SetSizeRequest) Validate() error {
	if err := ValidateOwner(req.Owner); err != nil {
		return err
	}
	if req.SizeBytes <= 0 {
		return errors.New("sizeBytes must be positive")
	}
	return nil
}
