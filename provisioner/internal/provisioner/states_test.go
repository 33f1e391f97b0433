package provisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"hostpath.dev/api/managerapi"
)

func TestProvisioningState(t *testing.T) {
	answer := func(reason managerapi.Reason) error {
		return fmt.Errorf("PUT /v1/pools/default/volumes/x: %w", &managerapi.Error{StatusCode: reason.HTTPStatus(), Status: managerapi.Status{Reason: reason, Message: "m"}})
	}
	tests := []struct {
		name          string
		err           error
		reschedulable bool
		want          controller.ProvisioningState
		wantText      string
	}{
		{name: "transport error", err: errors.New("dial tcp: connection refused"), want: controller.ProvisioningInBackground, wantText: "manager unreachable"},
		{name: "timeout", err: fmt.Errorf("PUT: %w", context.DeadlineExceeded), want: controller.ProvisioningInBackground},
		{name: "500", err: answer(managerapi.ReasonInternal), want: controller.ProvisioningInBackground},
		{name: "500 on a scheduled claim", err: answer(managerapi.ReasonInternal), reschedulable: true, want: controller.ProvisioningInBackground},
		{name: "507 pinned", err: answer(managerapi.ReasonInsufficientStorage), want: controller.ProvisioningFinished, wantText: "the volume does not fit in the pool"},
		{name: "507 scheduled", err: answer(managerapi.ReasonInsufficientStorage), reschedulable: true, want: controller.ProvisioningReschedule, wantText: "another node"},
		{name: "422 not enforced pinned", err: answer(managerapi.ReasonNotEnforced), want: controller.ProvisioningFinished, wantText: "cannot enforce the volume's size"},
		{name: "422 not enforced scheduled", err: answer(managerapi.ReasonNotEnforced), reschedulable: true, want: controller.ProvisioningReschedule, wantText: "another node"},
		{name: "404 pinned", err: answer(managerapi.ReasonNotFound), want: controller.ProvisioningFinished, wantText: "pool is not configured"},
		{name: "404 scheduled", err: answer(managerapi.ReasonNotFound), reschedulable: true, want: controller.ProvisioningReschedule},
		{name: "400", err: answer(managerapi.ReasonBadRequest), want: controller.ProvisioningFinished},
		{name: "400 scheduled", err: answer(managerapi.ReasonBadRequest), reschedulable: true, want: controller.ProvisioningFinished},
		{name: "409", err: answer(managerapi.ReasonConflict), want: controller.ProvisioningFinished},
		{name: "409 owner conflict pinned", err: ownerConflict("pvc-other"), want: controller.ProvisioningFinished, wantText: "pvc-other"},
		{name: "409 owner conflict scheduled is not rescheduled", err: ownerConflict("pvc-other"), reschedulable: true, want: controller.ProvisioningFinished},
		{name: "409 without owner record", err: ownerConflict(""), reschedulable: true, want: controller.ProvisioningFinished},
		{name: "429", err: answer(managerapi.ReasonTooManyRequests), want: controller.ProvisioningInBackground, wantText: "will retry"},
		{name: "429 scheduled", err: answer(managerapi.ReasonTooManyRequests), reschedulable: true, want: controller.ProvisioningInBackground, wantText: "busy"},
		{name: "413", err: answer(managerapi.ReasonRequestTooLarge), want: controller.ProvisioningFinished},
		{name: "401", err: answer(managerapi.ReasonUnauthorized), want: controller.ProvisioningInBackground, wantText: "ClusterRole " + managerapi.ClientClusterRole},
		{name: "403", err: answer(managerapi.ReasonForbidden), want: controller.ProvisioningInBackground, wantText: "ClusterRole " + managerapi.ClientClusterRole},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state, err := provisioningState(tc.err, tc.reschedulable)
			if state != tc.want {
				t.Errorf("state = %s, want %s", state, tc.want)
			}
			if !errors.Is(err, tc.err) && !strings.Contains(err.Error(), tc.err.Error()) {
				t.Errorf("err = %v does not carry %v", err, tc.err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantText)
			}
		})
	}
}
