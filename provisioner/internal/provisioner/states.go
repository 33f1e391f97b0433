package provisioner

import (
	"errors"
	"fmt"

	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"hostpath.dev/manager/pkg/client"
)

// provisioningState maps the error of a manager call made while provisioning
// to the library's state, and wraps it with what the user should know.
// reschedulable says whether the claim's node came from the scheduler, so
// that another node may be tried.
//
//   - transport errors and 5xx answers: in background, the library retries
//     (finding no manager to call is in background too, at the call site:
//     it is no answer of the manager);
//   - 401/403: in background with a message about the missing RBAC: it
//     works once the binding is fixed;
//   - 429 (too many requests): in background, the library retries;
//   - 409 OwnerConflict (the directory belongs to another PersistentVolume,
//     or to none): finished with the error, also when the scheduler chose the
//     node: two claims never share a directory (Provision words the message
//     with ownerConflictError);
//   - 507 (no space), 422 NotEnforced (the pool cannot enforce the size the
//     class's enforceSize asks for) and 404 (no such pool on the node):
//     reschedule when the scheduler chose the node, finished otherwise;
//   - other 4xx (400 bad request, 409 conflict, ...): finished.
func provisioningState(err error, reschedulable bool) (controller.ProvisioningState, error) {
	if err == nil {
		return controller.ProvisioningFinished, nil
	}
	reason := client.ReasonOf(err)
	switch reason {
	case "":
		return controller.ProvisioningInBackground, fmt.Errorf("manager unreachable: %w; will retry", err)
	case client.ReasonUnauthorized, client.ReasonForbidden:
		return controller.ProvisioningInBackground, rbacError(err)
	case client.ReasonTooManyRequests:
		return controller.ProvisioningInBackground, fmt.Errorf("the manager is busy: %w; will retry", err)
	case client.ReasonOwnerConflict:
		return controller.ProvisioningFinished, err
	case client.ReasonInsufficientStorage, client.ReasonNotFound, client.ReasonNotEnforced:
		what := "the volume does not fit in the pool"
		switch reason {
		case client.ReasonNotFound:
			what = "the pool is not configured on the node"
		case client.ReasonNotEnforced:
			what = "the pool cannot enforce the volume's size"
		}
		if reschedulable {
			return controller.ProvisioningReschedule, fmt.Errorf("%s, asking the scheduler for another node: %w", what, err)
		}
		return controller.ProvisioningFinished, fmt.Errorf("%s: %w", what, err)
	}
	if reason.HTTPStatus() >= 500 {
		return controller.ProvisioningInBackground, fmt.Errorf("%w; will retry", err)
	}
	return controller.ProvisioningFinished, err
}

// deletionError wraps the error of a manager call made while deleting.
func deletionError(err error) error {
	switch client.ReasonOf(err) {
	case client.ReasonUnauthorized, client.ReasonForbidden:
		return rbacError(err)
	}
	return err
}

// conflictOwner returns the current owner that a 409 OwnerConflict of the
// manager names ("" for a directory without an owner record), and whether
// err is such an answer.
func conflictOwner(err error) (string, bool) {
	var e *client.Error
	if !errors.As(err, &e) || e.Reason != client.ReasonOwnerConflict {
		return "", false
	}
	return e.Owner, true
}

// rbacError says what to fix when the manager rejects the provisioner.
func rbacError(err error) error {
	return fmt.Errorf("the manager rejected the provisioner's service account: bind it to the ClusterRole %s; will retry: %w", client.ClientClusterRole, err)
}
