package reclaim

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// outcome is what becomes of a PV under deletion once the manager answered:
// either the finalizer goes (release), or the PV is retried with err.
type outcome struct {
	release bool
	err     error
	// eventType, reason and message describe the event on the PV; with an
	// empty eventType there is no event and the message is only logged
	// (see report).
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

// report tells what o did to pv: an event on pv when o has an event type
// (recorder may be nil), else an Info log line when o has a reason
// (ReasonDirectoryRemoved: an event on a PV that is gone a moment later
// is read by no one and costs an API write per volume). An outcome with
// neither is only in the caller's V(2) log line.
func report(ctx context.Context, recorder record.EventRecorder, pv *v1.PersistentVolume, o outcome) {
	switch {
	case o.eventType != "":
		if recorder != nil {
			recorder.Event(pv, o.eventType, o.reason, o.message)
		}
	case o.reason != "":
		klog.FromContext(ctx).Info("Directory reached its final state", "reason", o.reason, "message", o.message)
	}
}
