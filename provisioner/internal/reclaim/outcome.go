package reclaim

import (
	"fmt"
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
