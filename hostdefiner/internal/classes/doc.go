// Package classes keeps the ConfigMap hostpathv1.ClassesConfigMap, the
// parameters of the claim-labelling MutatingAdmissionPolicy
// (manifests/base/policies/claim-labels.yaml): a key class.NAME for each
// StorageClass of the installation's provisioner names, whose value is
// the class's mode (hostpathv1.ModeMultihost, or hostpathv1.ModeNode for
// any other value of its mode parameter, as the provisioner reads it), and
// the key provisioners, the names separated by single spaces.
//
// The controller follows sample-controller on a queue of a single key:
// every event of a class of the installation, and every event of the
// ConfigMap itself (someone edits or deletes it), queues it; the sync
// computes the data from the StorageClass lister, creates the ConfigMap
// when it is missing, and updates it only when its data or its
// part-of label differ. Only the leader runs it (internal/app).
package classes
