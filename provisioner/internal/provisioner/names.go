package provisioner

// FieldManager is the field manager of the provisioner's writes: the
// selected-node patch of the claim sync, and the reclaim controller's
// finalizer patches.
const FieldManager = "hostpath-provisioner"

// ControlPlaneComponent is the kustomize component, in the repository,
// that lets the node agents run on control-plane nodes; the warnings about
// a claim of a control-plane node without an instance name it.
const ControlPlaneComponent = "manifests/components/control-plane"

// Reasons of the events the claim sync emits on claims (the library emits
// Provisioning, ProvisioningSucceeded, ProvisioningFailed and
// VolumeFailedDelete).
const (
	// ReasonNoNode (Warning): an Immediate claim names no node.
	ReasonNoNode = "NodeNotSpecified"
	// ReasonNodeNotFound (Warning): the claim names a node that does not exist.
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonNoInstance (Warning): no provisioner instance runs on the
	// claim's node (for a control-plane node, the message says that the
	// node agents run there only with ControlPlaneComponent).
	ReasonNoInstance = "NoProvisionerOnNode"
	// ReasonNodeConflict (Warning): the node annotations disagree.
	ReasonNodeConflict = "NodeAnnotationConflict"
	// ReasonRescheduling (Warning): the node the scheduler selected for a
	// WaitForFirstConsumer claim was deleted or runs no provisioner
	// instance, so the claim goes back to the scheduler.
	ReasonRescheduling = "Rescheduling"
	// ReasonNodeSelected (Normal): the acting instance set selected-node on
	// a pinned WaitForFirstConsumer claim.
	ReasonNodeSelected = "NodeSelected"
	// ReasonNodesPending (Warning): a multihost volume was made on every
	// ready node of its pool, and some nodes are still pending (their
	// HostDefinition of the pool is PendingForCreation, or Ready while
	// their manager is not); the host definer gives them the directory
	// when it defines them.
	ReasonNodesPending = "NodesPending"
)
