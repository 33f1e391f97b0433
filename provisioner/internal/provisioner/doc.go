// Package provisioner is the node-mode hostpath provisioner: the
// sig-storage-lib-external-provisioner Provisioner, Qualifier and
// DeletionGuard of one instance, which runs on one node and acts only for the
// claims and volumes of that node, and the ClaimSync beside it, which does
// the few writes for claims that the library does not.
//
// How a claim is handled:
//
//  1. decide reads the claim's StorageClass from the informer cache (claims
//     of other provisioners are not served) and picks the claim's node from
//     the annotations, in order hostpath.dev/provision-on-node,
//     kubevirt.io/provisionOnNode, volume.kubernetes.io/selected-node; an
//     explicit annotation wins over the scheduler's choice.
//  2. ShouldProvision (the Qualifier) says yes only on the instance of that
//     node, and only once a WaitForFirstConsumer claim has selected-node. It
//     reads the caches and writes nothing, so the other instances emit no
//     event, write nothing and count no failure for the claim.
//  3. The ClaimSync, driven by the claim informer, acts on the same
//     decision: on the instance of the claim's node it sets selected-node on
//     a WaitForFirstConsumer claim pinned by annotation (event NodeSelected),
//     so the library provisions it without a consumer, and reports annotations
//     that disagree (NodeAnnotationConflict). A claim that names no node
//     (Immediate class), a node that does not exist or a node without an
//     instance gets one Warning event, from the one instance that rendezvous
//     hashing of the claim UID over the live instances elects. Each instance
//     reports a given problem of a claim once. When the node of a
//     WaitForFirstConsumer claim came from the scheduler (selected-node), and
//     it was deleted or runs no instance, the elected instance instead says
//     yes in ShouldProvision and the claim goes back to the scheduler:
//     Provision answers ProvisioningReschedule, at once for a deleted node
//     (the library's ProvisionOptions.SelectedNodeName), after the checks
//     of the class and the claim for a node without an instance, and the
//     library removes selected-node (event Rescheduling).
//  4. Provision validates the class parameters and the claim, expands the
//     pathPattern (shortened with a hash suffix past 255 bytes) or takes the
//     directory the claim's hostpath.dev/reuse-directory names (after
//     checking that no PV uses it, then moving its owner record), asks the
//     node's manager for the directory with the PV as its owner, and returns
//     the PV (hostPath, or local with the class's volumeType) with node
//     affinity; manager answers map to the library's states in
//     provisioningState (a directory of another PV is a final failure: two
//     claims never share one), and finding no manager to call is retried
//     in background. A claim whose data source is a claim is a clone
//     (clone.go): it belongs to its source's node, and the manager copies
//     the source's directory instead of making an empty one.
//  5. ShouldDelete (the DeletionGuard) lets only the instance of the PV's
//     node delete; Delete hands the PV to Config.Reclaim, the one deletion
//     path (package reclaim), which takes its directory to its final state
//     on every node that holds it, as its owner. A directory without an
//     owner record is left alone, never adopted by a delete. The order:
//     Delete returns nil once every node is done, leaving the PV's
//     finalizer on; the library deletes the PV (once); the reclaim
//     controller then removes the finalizer of the PV under deletion,
//     without calling the managers again when this instance's Delete did
//     moments before (and after calling them when it did not).
//  6. AdoptAll gives directories made before owner records to the one PV
//     that names them, never to two. It also marks this node's copies of
//     multihost volumes whose owner records predate the mode as multihost:
//     a manager lets callers bound to other nodes (the fan-out, the host
//     definer) change nothing else.
//
// The names it writes and reads on objects (claim and PV annotations, mode
// values, the finalizer, the StorageClass parameters it shares with the host
// definer) live in the HostDefinition API package, hostpathv1
// (hostpath.dev/api/hostpath/v1, well_known.go); the
// Kubernetes ones in k8s.io/component-helpers/storage/volume.
package provisioner
