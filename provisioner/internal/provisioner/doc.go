// Package provisioner is the node-mode hostpath provisioner: the
// sig-storage-lib-external-provisioner Provisioner, Qualifier and
// DeletionGuard of one instance, which runs on one node and acts only for the
// claims and volumes of that node.
//
// How a claim is handled:
//
//  1. ShouldProvision (the Qualifier) reads the claim's StorageClass from the
//     informer cache and ignores claims of other provisioners.
//  2. It picks the claim's node from the annotations, in order
//     hostpath.dev/provision-on-node, kubevirt.io/provisionOnNode,
//     volume.kubernetes.io/selected-node; an explicit annotation wins over
//     the scheduler's choice, with a Warning event.
//  3. Only the instance of that node says yes. A WaitForFirstConsumer claim
//     pinned by annotation gets volume.kubernetes.io/selected-node from that
//     instance, so the library provisions it without a consumer.
//  4. A claim that names no node (Immediate class), a node that does not
//     exist or a node without an instance gets one Warning event, from the
//     one instance that rendezvous hashing of the claim UID over the live
//     instances elects. No other instance writes anything.
//  5. Provision validates the class parameters and the claim, expands the
//     pathPattern (shortened with a hash suffix past 255 bytes) or takes the
//     directory the claim's hostpath.dev/reuse-directory names (after
//     checking that no PV uses it, then moving its owner record), asks the
//     node's manager for the directory with the PV as its owner, and returns
//     the PV with hostPath and node affinity; manager errors map to the
//     library's states in provisioningState (a directory of another PV is a
//     final failure: two claims never share one).
//  6. ShouldDelete (the DeletionGuard) lets only the instance of the PV's
//     node delete; Delete removes the directory through the manager, as its
//     owner, adopting a directory made before owner records first.
//  7. Adopt and AdoptAll give directories made before owner records to the
//     one PV that names them, never to two.
package provisioner
