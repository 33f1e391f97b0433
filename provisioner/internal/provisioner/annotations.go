package provisioner

// Claim annotations that choose the node of a node-mode volume, in order of
// precedence.
const (
	// AnnProvisionOnNode pins a claim to a node.
	AnnProvisionOnNode = "hostpath.dev/provision-on-node"
	// AnnKubevirtProvisionOnNode is kubevirt's hostpath-provisioner key,
	// honoured like AnnProvisionOnNode.
	AnnKubevirtProvisionOnNode = "kubevirt.io/provisionOnNode"
	// AnnSelectedNode is set by the scheduler for WaitForFirstConsumer
	// claims (and by the owning instance for pinned ones).
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
)

// AnnReuseDirectory on a claim names an existing directory of the pool to
// use instead of the pathPattern (node mode): a directory kept by a deleted
// Retain volume, or one without an owner record that no volume names. The
// directory is handed to the new volume only after those checks.
const AnnReuseDirectory = "hostpath.dev/reuse-directory"

// PersistentVolume annotations saying what a volume is.
const (
	// AnnProvisionedBy names the provisioner that made a volume; the
	// library sets it.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// AnnNode is the node that holds the directory (node mode).
	AnnNode = "hostpath.dev/node"
	// AnnPool is the storage pool.
	AnnPool = "hostpath.dev/pool"
	// AnnDirectory is the directory's name inside the pool.
	AnnDirectory = "hostpath.dev/directory"
	// AnnClaimNamespace is the namespace of the claim the volume was made for.
	AnnClaimNamespace = "hostpath.dev/claim-namespace"
	// AnnClaimName is the name of the claim the volume was made for.
	AnnClaimName = "hostpath.dev/claim-name"
	// AnnMode is the volume mode.
	AnnMode = "hostpath.dev/mode"
)

// FieldManager is the field manager of the provisioner's writes to claims.
const FieldManager = "hostpath-provisioner"

// Reasons of the events the provisioner emits itself (the library emits
// Provisioning, ProvisioningSucceeded, ProvisioningFailed and
// VolumeFailedDelete).
const (
	// ReasonNoNode (Warning): an Immediate claim names no node.
	ReasonNoNode = "NodeNotSpecified"
	// ReasonNodeNotFound (Warning): the claim names a node that does not exist.
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonNoInstance (Warning): no provisioner instance runs on the
	// claim's node.
	ReasonNoInstance = "NoProvisionerOnNode"
	// ReasonNodeConflict (Warning): the node annotations disagree.
	ReasonNodeConflict = "NodeAnnotationConflict"
	// ReasonNodeSelected (Normal): the owning instance set selected-node on
	// a pinned WaitForFirstConsumer claim.
	ReasonNodeSelected = "NodeSelected"
)
