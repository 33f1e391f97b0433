package provisioner

import (
	"fmt"

	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"hostpath.dev/api/managerapi"
)

// provisioningState maps the error of a manager call made while provisioning
// to the library's state, and wraps it with what the user should know. The
// answer's meaning is managerapi.Classify's, the one vocabulary every caller of
// the managers uses. reschedulable says whether the claim's node came from
// the scheduler, so that another node may be tried.
//
//   - no answer (transport errors, time limits), 5xx answers: in
//     background, the library retries (finding no manager to call is in
//     background too, at the call site: it is no answer of the manager);
//   - 401/403 (AnswerDenied): in background with a message about the
//     missing RBAC: it works once the binding is fixed;
//   - 429 (AnswerBusy): in background, the library retries;
//   - OwnerConflict (the directory belongs to another PersistentVolume, or
//     to none): finished with the error, also when the scheduler chose the
//     node: two claims never share a directory (Provision words the message
//     with ownerConflictError);
//   - no space, NotEnforced (the pool cannot enforce the size the class's
//     enforceSize asks for), no such pool on the node: reschedule when the
//     scheduler chose the node, finished otherwise;
//   - any other answer (400 bad request, 409 conflict, ...): finished.
func provisioningState(err error, reschedulable bool) (controller.ProvisioningState, error) {
	switch a := managerapi.Classify(err); a {
	case managerapi.AnswerOK:
		return controller.ProvisioningFinished, nil
	case managerapi.AnswerUnreachable:
		return controller.ProvisioningInBackground, fmt.Errorf("manager unreachable: %w; will retry", err)
	case managerapi.AnswerDenied:
		return controller.ProvisioningInBackground, rbacError(err)
	case managerapi.AnswerBusy:
		return controller.ProvisioningInBackground, fmt.Errorf("the manager is busy: %w; will retry", err)
	case managerapi.AnswerServerError:
		return controller.ProvisioningInBackground, fmt.Errorf("%w; will retry", err)
	case managerapi.AnswerNoSpace, managerapi.AnswerPoolMissing, managerapi.AnswerVolumeMissing, managerapi.AnswerNotEnforced:
		what := "the volume does not fit in the pool"
		switch a {
		case managerapi.AnswerPoolMissing, managerapi.AnswerVolumeMissing:
			what = "the pool is not configured on the node"
		case managerapi.AnswerNotEnforced:
			what = "the pool cannot enforce the volume's size"
		}
		if reschedulable {
			return controller.ProvisioningReschedule, fmt.Errorf("%s, asking the scheduler for another node: %w", what, err)
		}
		return controller.ProvisioningFinished, fmt.Errorf("%s: %w", what, err)
	}
	return controller.ProvisioningFinished, err
}

// nodeError adds what to fix to a manager's error of one node.
func nodeError(err error) error {
	if managerapi.Classify(err) == managerapi.AnswerDenied {
		return rbacError(err)
	}
	return err
}

// rbacError says what to fix when the manager rejects the provisioner.
func rbacError(err error) error {
	return fmt.Errorf("the manager rejected the provisioner's service account: bind it to the ClusterRole %s; will retry: %w", managerapi.ClientClusterRole, err)
}
