package reclaim

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"hostpath.dev/manager/pkg/client"
)

// outcome is what becomes of a PV under deletion once the manager answered:
// either the finalizer goes (release), or the PV is retried with err.
type outcome struct {
	release bool
	err     error
	// eventType, reason and message describe the event on the PV; with an
	// empty eventType the message is only logged.
	eventType, reason, message string
}

// String names a directory for events and errors.
func (d directory) String() string {
	return fmt.Sprintf("directory %q in pool %q on node %q", d.name, d.pool, d.node)
}

// retry is the outcome of err, from trying to do what: the PV is retried.
func retry(err error, reason, what string) outcome {
	return outcome{err: fmt.Errorf("%s: %w", what, err), eventType: v1.EventTypeWarning, reason: reason,
		message: fmt.Sprintf("Failed to %s (will retry): %v", what, err)}
}

// ownerOf returns the current owner that an OwnerConflict answer names.
func ownerOf(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Owner
	}
	return ""
}

// deleteOutcome maps the answer to DeleteVolume (or the failure to find the
// manager) for a PV with reclaim policy Delete.
func deleteOutcome(err error, dir directory) outcome {
	if err == nil {
		return outcome{release: true, eventType: v1.EventTypeNormal, reason: ReasonDirectoryRemoved,
			message: fmt.Sprintf("Removed the %s", dir)}
	}
	switch client.ReasonOf(err) {
	case client.ReasonNotFound:
		// The pool is gone, so is the directory.
		return outcome{release: true, eventType: v1.EventTypeNormal, reason: ReasonDirectoryRemoved,
			message: fmt.Sprintf("The %s was already gone", dir)}
	case client.ReasonOwnerConflict:
		msg := fmt.Sprintf("The %s belongs to PersistentVolume %q, so it was left in place", dir, ownerOf(err))
		if ownerOf(err) == "" {
			msg = fmt.Sprintf("The %s has no owner record, so it was left in place: remove it by hand if nothing else uses it", dir)
		}
		return outcome{release: true, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved, message: msg}
	default:
		return retry(err, ReasonDirectoryNotRemoved, "remove the "+dir.String())
	}
}

// retainOutcome maps the answer to SetOwner (or the failure to find the
// manager) for a PV with reclaim policy Retain or Recycle.
func retainOutcome(err error, dir directory) outcome {
	if err == nil {
		return outcome{release: true, eventType: v1.EventTypeNormal, reason: ReasonDirectoryRetained,
			message: fmt.Sprintf("The %s keeps its data, marked retained: remove it by hand when done", dir)}
	}
	switch client.ReasonOf(err) {
	case client.ReasonNotFound:
		return outcome{release: true, message: fmt.Sprintf("The %s is gone: nothing to retain", dir)}
	case client.ReasonOwnerConflict:
		return outcome{release: true, message: fmt.Sprintf("The %s now belongs to %q: left as it is", dir, ownerOf(err))}
	default:
		return retry(err, ReasonDirectoryNotRemoved, "mark the "+dir.String()+" retained")
	}
}

// nodeGoneOutcome is the outcome of a PV whose node no longer exists (or
// whose annotation nodeAnn names none).
func nodeGoneOutcome(dir directory, policy v1.PersistentVolumeReclaimPolicy, nodeAnn string) outcome {
	o := outcome{release: true, eventType: v1.EventTypeWarning, reason: ReasonDirectoryNotRemoved}
	switch {
	case dir.node == "":
		o.message = fmt.Sprintf("The PersistentVolume names no node (annotation %s): no directory was removed", nodeAnn)
	case policy == v1.PersistentVolumeReclaimDelete:
		o.message = fmt.Sprintf("The %s could not be removed: the node no longer exists", dir)
	default:
		o.message = fmt.Sprintf("The %s could not be marked retained: the node no longer exists", dir)
	}
	return o
}
