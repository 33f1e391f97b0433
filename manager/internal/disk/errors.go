package disk

import "hostpath.dev/api/managerapi"

// The Store reports every failure that has an answer in the API as a
// *managerapi.Error made by managerapi.Errorf: its Reason says which answer it gets
// (test with errors.As or managerapi.ReasonOf), its Message is for people.
// Anything else (an I/O error, say) is an internal error.

func badRequestf(format string, args ...any) error {
	return managerapi.Errorf(managerapi.ReasonBadRequest, format, args...)
}

// badRequest is err, a broken rule of the API (see names.go), as a
// BadRequest; nil for nil.
func badRequest(err error) error {
	if err == nil {
		return nil
	}
	return badRequestf("%s", err)
}

// notFoundf is the NotFound of a missing volume.
func notFoundf(format string, args ...any) error {
	return managerapi.Errorf(managerapi.ReasonNotFound, format, args...)
}

// poolNotFoundf is the PoolNotFound of a pool that is not configured, or
// whose directory does not exist: never the NotFound of a volume, so that
// no caller takes a missing pool for a removed volume.
func poolNotFoundf(format string, args ...any) error {
	return managerapi.Errorf(managerapi.ReasonPoolNotFound, format, args...)
}

func conflictf(format string, args ...any) error {
	return managerapi.Errorf(managerapi.ReasonConflict, format, args...)
}

// ownerConflictf is an OwnerConflict naming owner, the directory's current
// owner ("" when it has no owner record).
func ownerConflictf(owner, format string, args ...any) error {
	e := managerapi.Errorf(managerapi.ReasonOwnerConflict, format, args...)
	e.Owner = owner
	return e
}

// forbiddenf is the Forbidden of a write that the caller's authority does
// not reach (a caller bound to another node, on a node-mode volume).
func forbiddenf(format string, args ...any) error {
	return managerapi.Errorf(managerapi.ReasonForbidden, format, args...)
}
