// Package classes keeps the ConfigMap hostpathv1.ClassesConfigMap, the
// parameters of the claim-labelling MutatingAdmissionPolicy
// (manifests/base/policies/claim-labels.yaml): a key class.NAME for each
// StorageClass of the installation's provisioner names, whose value is
// the class's mode (hostpathv1.ModeMultihost, or hostpathv1.ModeNode for
// any other value of its mode parameter, as the provisioner reads it), a
// key provisioner.NAME with the class's provisioner and, when the class
// binds Immediate, a key immediate.NAME with an empty value (from which
// the policy names a pending claim's provisioner where the PV controller
// would: hostpathv1.ProvisionerKey); the
// key provisioners, the names separated by single spaces; and a key
// node.NAME (hostpathv1.ServedKey), with an empty value, for each node
// that runs a provisioner pod (scheduled, not being deleted, selected by
// --provisioner-selector in the host definer's namespace), which the
// policy looks up to label a pending claim with its node or Unsorted.
//
// The controller follows sample-controller on a queue of a single key:
// every event of a class of the installation, every event of a
// provisioner pod that changes the node it serves, and every event of the
// ConfigMap itself (someone edits or deletes it), queues it; the sync
// computes the data from the StorageClass and Pod listers, creates the
// ConfigMap when it is missing, and updates it only when its data or its
// part-of label differ.
//
// When an update removes a node's key, the sync then touches the pending
// claims labelled with that node (it sets Unsorted): the API server runs
// the policy on the update, which leaves them Unsorted now, so that
// every instance sees them and the elected one speaks for them (the claims
// of a few nodes are listed node by node, those of more in one list of
// every claim labelled with a node). A claim that comes back still
// labelled with the node (the API server has not seen the new ConfigMap
// yet) fails the sync, which the queue retries, a few times. Only the
// leader runs it (internal/app); a node whose touch a leader change
// interrupts keeps its claims' label until an update changes their node.
//
// A sync that creates the ConfigMap (it was deleted) also lists the
// claims without the label and sets Unsorted on those of hostpath
// (OfHostpath): the API server skips the policy while its parameters are
// missing, so a claim made then has no label, which no instance watching
// by label sees.
package classes
