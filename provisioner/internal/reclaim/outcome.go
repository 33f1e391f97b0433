package reclaim

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/provisioner/internal/annotations"
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

// release is the outcome that removes the finalizer, then emits the event
// eventType, reason, message (only logs message when eventType is empty).
func release(eventType, reason, message string) outcome {
	return outcome{release: true, eventType: eventType, reason: reason, message: message}
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

// reclaimOutcome maps the manager's answer (or the failure to find the
// manager) to the outcome of a PV of this node: the answer to DeleteVolume
// when deleting (reclaim policy Delete), else to SetOwner marking the
// directory retained (Retain, Recycle). A directory that is gone, or that
// another PV owns, releases the PV; any other failure retries it.
func reclaimOutcome(err error, dir directory, deleting bool) outcome {
	reason, owner := client.ReasonOf(err), ownerOf(err)
	switch {
	case err == nil && deleting:
		return release(v1.EventTypeNormal, ReasonDirectoryRemoved, fmt.Sprintf("Removed the %s", dir))
	case err == nil:
		return release(v1.EventTypeNormal, ReasonDirectoryRetained, fmt.Sprintf(
			"The %s keeps its data, marked retained: remove it by hand when done", dir))
	case reason == client.ReasonNotFound && deleting:
		// The pool is gone, so is the directory.
		return release(v1.EventTypeNormal, ReasonDirectoryRemoved, fmt.Sprintf("The %s was already gone", dir))
	case reason == client.ReasonNotFound:
		return release("", "", fmt.Sprintf("The %s is gone: nothing to retain", dir))
	case reason == client.ReasonOwnerConflict && deleting && owner == "":
		return release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The %s has no owner record, so it was left in place: remove it by hand if nothing else uses it", dir))
	case reason == client.ReasonOwnerConflict && deleting:
		return release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The %s belongs to PersistentVolume %q, so it was left in place", dir, owner))
	case reason == client.ReasonOwnerConflict:
		return release("", "", fmt.Sprintf("The %s now belongs to %q: left as it is", dir, owner))
	case deleting:
		return retry(err, ReasonDirectoryNotRemoved, "remove the "+dir.String())
	}
	return retry(err, ReasonDirectoryNotRemoved, "mark the "+dir.String()+" retained")
}

// nodeGoneOutcome is the outcome of a PV whose node no longer exists (or
// whose annotation annotations.Node names none).
func nodeGoneOutcome(dir directory, policy v1.PersistentVolumeReclaimPolicy) outcome {
	switch {
	case dir.node == "":
		return release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The PersistentVolume names no node (annotation %s): no directory was removed", annotations.Node))
	case policy == v1.PersistentVolumeReclaimDelete:
		return release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
			"The %s could not be removed: the node no longer exists", dir))
	}
	return release(v1.EventTypeWarning, ReasonDirectoryNotRemoved, fmt.Sprintf(
		"The %s could not be marked retained: the node no longer exists", dir))
}
