package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Phase is where a HostDefinition stands.
// +kubebuilder:validation:Enum=Ready;PendingForCreation;PendingForDeletion;Error
type Phase string

// The phases of a HostDefinition.
const (
	// PhaseReady: the host is defined on the pool and working.
	PhaseReady Phase = "Ready"
	// PhasePendingForCreation: the last define attempt did not complete; it
	// will be retried.
	PhasePendingForCreation Phase = "PendingForCreation"
	// PhasePendingForDeletion: the last undefine attempt did not complete;
	// it will be retried.
	PhasePendingForDeletion Phase = "PendingForDeletion"
	// PhaseError: define or undefine did not complete and will not be
	// retried until an operator asks (RetryAnnotation).
	PhaseError Phase = "Error"
)

// Condition types of a HostDefinition.
const (
	// ConditionDefined is True while the phase is Ready; False says why the
	// last define attempt did not complete.
	ConditionDefined = "Defined"
	// ConditionUndefineBlocked is True when the node left but its
	// definition is kept: --allow-delete=false or the node's
	// AvoidDeletionLabel.
	ConditionUndefineBlocked = "UndefineBlocked"
)

// RetryAnnotation on a HostDefinition forces a new round of define tries:
// set it to any new value (a timestamp, say) and the host definer starts
// over from the first try, also from Error.
const RetryAnnotation = "hostdefiner.hostpath.dev/retry"

// AvoidDeletionLabel, set to "true" on a Node, keeps the node's
// definitions when the node leaves (its Node is deleted or the manager
// DaemonSet no longer runs there).
const AvoidDeletionLabel = "hostdefiner.hostpath.dev/avoid-deletion"

// HostDefinition says whether one node is ready to hold volume directories
// of one storage pool. The host definer creates, updates and deletes them;
// users read them, and may set RetryAnnotation.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:scope=Cluster,shortName=hostdef
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Storage",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
type HostDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the node and the pool; it does not change.
	Spec HostDefinitionSpec `json:"spec"`
	// Status is what the host definer found at its last try.
	// +optional
	Status HostDefinitionStatus `json:"status,omitempty"`
}

// HostDefinitionSpec names the node and the pool a definition is for.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type HostDefinitionSpec struct {
	// NodeName is the Kubernetes node.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// Pool is the storage pool, as named by the StorageClass parameter
	// "pool".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Pool string `json:"pool"`
}

// HostDefinitionStatus is what the host definer found at its last try.
type HostDefinitionStatus struct {
	// Phase is where the definition stands.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Conditions say why (types Defined and UndefineBlocked).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Tries counts the define (or undefine) attempts of the current round;
	// it starts again at 0 once Ready or when RetryAnnotation changes.
	// +optional
	Tries int32 `json:"tries,omitempty"`
	// LastTryTime is when the last attempt ended.
	// +optional
	LastTryTime *metav1.Time `json:"lastTryTime,omitempty"`
	// NextTryTime is when the next attempt is due; empty when none is.
	// +optional
	NextTryTime *metav1.Time `json:"nextTryTime,omitempty"`
	// DefinedTime is when the definition last became Ready.
	// +optional
	DefinedTime *metav1.Time `json:"definedTime,omitempty"`
	// Retry is the value of RetryAnnotation that the current round of tries
	// answers.
	// +optional
	Retry string `json:"retry,omitempty"`

	// ManagerPod is the manager pod that answered the last try.
	// +optional
	ManagerPod string `json:"managerPod,omitempty"`
	// ManagerPodUID is that pod's UID: a new manager pod on the node makes
	// the host definer verify the host again.
	// +optional
	ManagerPodUID types.UID `json:"managerPodUID,omitempty"`
	// HostID is the host's identifier from its manager (GET /v1/host); two
	// nodes with the same HostID are a cloned host.
	// +optional
	HostID string `json:"hostID,omitempty"`
	// MachineID is the host's /etc/machine-id, when its manager reports one.
	// +optional
	MachineID string `json:"machineID,omitempty"`
	// BootID changes at every boot of the host; a change is reported as a
	// Rebooted event and the host is verified again.
	// +optional
	BootID string `json:"bootID,omitempty"`

	// PoolPath is the pool's directory on the host.
	// +optional
	PoolPath string `json:"poolPath,omitempty"`
	// CapacityBytes is the size of the filesystem holding the pool.
	// +optional
	CapacityBytes int64 `json:"capacityBytes,omitempty"`
	// FreeBytes is the space left on it at the last try.
	// +optional
	FreeBytes int64 `json:"freeBytes,omitempty"`
	// MinFreeBytes is the minimum free space the host definer required.
	// +optional
	MinFreeBytes int64 `json:"minFreeBytes,omitempty"`
	// SizeEnforcement is how the pool's filesystem on the node enforces
	// volume sizes ("btrfs", "xfs", "ext4"), or "none" (see
	// SizeEnforcementReason), as the manager reported it at the last try.
	// +optional
	SizeEnforcement string `json:"sizeEnforcement,omitempty"`
	// SizeEnforcementReason says why the pool does not enforce sizes.
	// +optional
	SizeEnforcementReason string `json:"sizeEnforcementReason,omitempty"`

	// MultihostVolumes counts the multihost volumes of the pool whose
	// directory the node holds.
	// +optional
	MultihostVolumes int32 `json:"multihostVolumes,omitempty"`
	// BackfilledVolumes counts the multihost directories the host definer
	// has created on the node since the definition was made (those the node
	// lacked). It is a tally: directories a leader made before it died
	// without writing the status are not counted.
	// +optional
	BackfilledVolumes int32 `json:"backfilledVolumes,omitempty"`
}

// HostDefinitionList is a list of HostDefinitions.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type HostDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the definitions.
	Items []HostDefinition `json:"items"`
}
