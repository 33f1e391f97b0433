package provisioner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/managertest"
)

func TestProvisioningState(t *testing.T) {
	tests := []struct {
		name          string
		err           error
		reschedulable bool
		want          controller.ProvisioningState
		wantText      string
	}{
		{name: "transport error", err: errors.New("dial tcp: connection refused"), want: controller.ProvisioningInBackground, wantText: "manager unreachable"},
		{name: "timeout", err: fmt.Errorf("PUT: %w", context.DeadlineExceeded), want: controller.ProvisioningInBackground},
		{name: "500", err: managertest.Answer(managerapi.ReasonInternal, "m"), want: controller.ProvisioningInBackground},
		{name: "500 on a scheduled claim", err: managertest.Answer(managerapi.ReasonInternal, "m"), reschedulable: true, want: controller.ProvisioningInBackground},
		{name: "507 pinned", err: managertest.Answer(managerapi.ReasonInsufficientStorage, "m"), want: controller.ProvisioningFinished, wantText: "the volume does not fit in the pool"},
		{name: "507 scheduled", err: managertest.Answer(managerapi.ReasonInsufficientStorage, "m"), reschedulable: true, want: controller.ProvisioningReschedule, wantText: "another node"},
		{name: "422 not enforced pinned", err: managertest.Answer(managerapi.ReasonNotEnforced, "m"), want: controller.ProvisioningFinished, wantText: "cannot enforce the volume's size"},
		{name: "422 not enforced scheduled", err: managertest.Answer(managerapi.ReasonNotEnforced, "m"), reschedulable: true, want: controller.ProvisioningReschedule, wantText: "another node"},
		{name: "404 pinned", err: managertest.Answer(managerapi.ReasonNotFound, "m"), want: controller.ProvisioningFinished, wantText: "pool is not configured"},
		{name: "404 scheduled", err: managertest.Answer(managerapi.ReasonNotFound, "m"), reschedulable: true, want: controller.ProvisioningReschedule},
		{name: "400", err: managertest.Answer(managerapi.ReasonBadRequest, "m"), want: controller.ProvisioningFinished},
		{name: "400 scheduled", err: managertest.Answer(managerapi.ReasonBadRequest, "m"), reschedulable: true, want: controller.ProvisioningFinished},
		{name: "409", err: managertest.Answer(managerapi.ReasonConflict, "m"), want: controller.ProvisioningFinished},
		{name: "409 owner conflict pinned", err: managertest.OwnerConflict("pvc-other"), want: controller.ProvisioningFinished, wantText: "pvc-other"},
		{name: "409 owner conflict scheduled is not rescheduled", err: managertest.OwnerConflict("pvc-other"), reschedulable: true, want: controller.ProvisioningFinished},
		{name: "409 without owner record", err: managertest.OwnerConflict(""), reschedulable: true, want: controller.ProvisioningFinished},
		{name: "429", err: managertest.Answer(managerapi.ReasonTooManyRequests, "m"), want: controller.ProvisioningInBackground, wantText: "will retry"},
		{name: "429 scheduled", err: managertest.Answer(managerapi.ReasonTooManyRequests, "m"), reschedulable: true, want: controller.ProvisioningInBackground, wantText: "busy"},
		{name: "413", err: managertest.Answer(managerapi.ReasonRequestTooLarge, "m"), want: controller.ProvisioningFinished},
		{name: "401", err: managertest.Answer(managerapi.ReasonUnauthorized, "m"), want: controller.ProvisioningInBackground, wantText: "ClusterRole " + managerapi.ClientClusterRole},
		{name: "403", err: managertest.Answer(managerapi.ReasonForbidden, "m"), want: controller.ProvisioningInBackground, wantText: "ClusterRole " + managerapi.ClientClusterRole},
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
