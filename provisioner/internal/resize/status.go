package resize

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// claimState is what the resizer writes of a claim's status: its
// conditions, allocatedResources[storage], allocatedResourceStatuses[storage]
// and, when finishing, capacity[storage].
type claimState struct {
	conditions []v1.PersistentVolumeClaimCondition
	allocated  resource.Quantity
	// status is allocatedResourceStatuses[storage]; "" removes the key.
	status v1.ClaimResourceStatus
	// capacity is status.capacity[storage]; nil leaves it as it is.
	capacity *resource.Quantity
}

// resizingState is the claim marked as growing to size (step 3): condition
// Resizing, allocatedResources size, ControllerResizeInProgress. A claim
// already growing to size keeps its ControllerResizeError (the last
// failure, retried); a new attempt drops it.
func resizingState(claim *v1.PersistentVolumeClaim, size resource.Quantity, now metav1.Time) claimState {
	conds := claim.Status.Conditions
	allocated, ok := claim.Status.AllocatedResources[v1.ResourceStorage]
	retried := claim.Status.AllocatedResourceStatuses[v1.ResourceStorage] == v1.PersistentVolumeClaimControllerResizeInProgress &&
		ok && allocated.Cmp(size) == 0
	if !retried {
		conds = withoutConditions(conds, v1.PersistentVolumeClaimControllerResizeError)
	}
	conds = withCondition(conds, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue}, now)
	return claimState{conditions: conds, allocated: size, status: v1.PersistentVolumeClaimControllerResizeInProgress}
}

// failedState is the claim whose growth to size ended in o (infeasible or
// failed): condition ControllerResizeError with o's message; an infeasible
// claim drops Resizing and becomes ControllerResizeInfeasible (it waits for
// the user), a failed one stays Resizing and ControllerResizeInProgress
// (retried).
func failedState(claim *v1.PersistentVolumeClaim, size resource.Quantity, o outcome, now metav1.Time) claimState {
	s := resizingState(claim, size, now)
	s.conditions = withCondition(s.conditions, v1.PersistentVolumeClaimCondition{
		Type: v1.PersistentVolumeClaimControllerResizeError, Status: v1.ConditionTrue,
		Reason: ReasonResizeFailed, Message: o.message,
	}, now)
	if o.kind == infeasible {
		s.conditions = withoutConditions(s.conditions, v1.PersistentVolumeClaimResizing)
		s.status = v1.PersistentVolumeClaimControllerResizeInfeasible
	}
	return s
}

// finishedState is the claim whose volume has size (step 6): capacity and
// allocatedResources size, no Resizing or ControllerResizeError, no storage
// key in allocatedResourceStatuses.
func finishedState(claim *v1.PersistentVolumeClaim, size resource.Quantity) claimState {
	return claimState{
		conditions: withoutConditions(claim.Status.Conditions, v1.PersistentVolumeClaimResizing, v1.PersistentVolumeClaimControllerResizeError),
		allocated:  size,
		capacity:   &size,
	}
}

// matches reports whether claim's status already is s (condition times
// aside).
func (s claimState) matches(claim *v1.PersistentVolumeClaim) bool {
	st := claim.Status
	allocated, ok := st.AllocatedResources[v1.ResourceStorage]
	if !ok || allocated.Cmp(s.allocated) != 0 || st.AllocatedResourceStatuses[v1.ResourceStorage] != s.status {
		return false
	}
	if s.capacity != nil {
		capacity, ok := st.Capacity[v1.ResourceStorage]
		if !ok || capacity.Cmp(*s.capacity) != 0 {
			return false
		}
	}
	return slices.EqualFunc(st.Conditions, s.conditions, func(a, b v1.PersistentVolumeClaimCondition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
	})
}

// patch returns the JSON merge patch of the status subresource that gives
// claim the state s. It names the claim's resourceVersion, so that it fails
// with a conflict rather than overwrite conditions written since the cache
// saw the claim. Maps are merged key by key (the storage key of
// allocatedResourceStatuses is removed with null); the conditions are
// replaced whole.
func (s claimState) patch(claim *v1.PersistentVolumeClaim) ([]byte, error) {
	var state any // null removes the key
	if s.status != "" {
		state = s.status
	}
	var conds any // null removes the list
	if len(s.conditions) > 0 {
		conds = s.conditions
	}
	status := map[string]any{
		"conditions":                conds,
		"allocatedResources":        map[v1.ResourceName]any{v1.ResourceStorage: s.allocated.String()},
		"allocatedResourceStatuses": map[v1.ResourceName]any{v1.ResourceStorage: state},
	}
	if s.capacity != nil {
		status["capacity"] = map[v1.ResourceName]any{v1.ResourceStorage: s.capacity.String()}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": claim.ResourceVersion},
		"status":   status,
	})
}

// writeStatus patches the status of claim to s unless it already is s. It
// returns the claim as it now is (the API server's answer, or claim when
// nothing was written) and whether it wrote.
func writeStatus(ctx context.Context, c kubernetes.Interface, fieldManager string, claim *v1.PersistentVolumeClaim, s claimState) (*v1.PersistentVolumeClaim, bool, error) {
	if s.matches(claim) {
		return claim, false, nil
	}
	patch, err := s.patch(claim)
	if err != nil {
		return nil, false, fmt.Errorf("encode the status patch of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	updated, err := c.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil {
		return nil, false, fmt.Errorf("patch the status of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return updated, true, nil
}

// withCondition returns conds with cond in place of the condition of its
// type (appended when there is none), without changing conds. The
// transition time stays that of a condition of the same status, and is now
// otherwise.
func withCondition(conds []v1.PersistentVolumeClaimCondition, cond v1.PersistentVolumeClaimCondition, now metav1.Time) []v1.PersistentVolumeClaimCondition {
	out := slices.Clone(conds)
	cond.LastTransitionTime = now
	for i, c := range out {
		if c.Type != cond.Type {
			continue
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
		out[i] = cond
		return out
	}
	return append(out, cond)
}

// withoutConditions returns conds without the conditions of the types,
// without changing conds.
func withoutConditions(conds []v1.PersistentVolumeClaimCondition, types ...v1.PersistentVolumeClaimConditionType) []v1.PersistentVolumeClaimCondition {
	return slices.DeleteFunc(slices.Clone(conds), func(c v1.PersistentVolumeClaimCondition) bool {
		return slices.Contains(types, c.Type)
	})
}
