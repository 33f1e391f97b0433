// Package controller keeps one HostDefinition per (node, storage pool), in
// the shape of Kubernetes' sample-controller: shared informers on Nodes, the
// manager pods and DaemonSet, the StorageClasses of the provisioner,
// HostDefinitions and PersistentVolumes feed a typed, rate-limited workqueue
// keyed by (node, pool); the sync reads listers only and writes status
// through the status subresource.
//
// # What a sync does
//
// A sync reads the Facts of its key from the caches (the definition, its
// Node, the node's manager pods, found through informer indexes by node
// name), asks NextStep, a pure function, what comes next (create, label,
// try, wait, undefine...), and does that one Step. The outcome of a try or
// an undefine becomes the next status through pure functions too
// (definedStatus, failedStatus, undefineFailedStatus), so that every phase
// transition is decided, and table-tested, without the API server.
//
// A node is wanted for a pool when some StorageClass of the provisioner
// names the pool and the manager DaemonSet runs there: a new definition is
// made when the DaemonSet would start a pod on the node (placement.ShouldSchedule)
// or a manager pod is there; an existing one stays while the DaemonSet
// would keep its pod (placement.ShouldRun: NoSchedule taints, cordons,
// NotReady and unreachable nodes, rolling updates, crashes and kubelet
// restarts are not leaving).
//
// Define (to Ready) is one try: the node's manager pod answers GET /v1/host;
// no other node reported its host ID or machine ID first (else the
// definition is a cloned host and goes to Error at once, naming both
// nodes); PUT /v1/pools/{pool} prepares the pool directory; its free bytes
// meet the minimum; and every multihost volume of the pool has its
// directory on the node (backfill, in parallel; the node is then moved from
// the PV's pending-nodes annotation to its nodes annotation). A failed try
// makes the phase PendingForCreation, with the reason in the Defined
// condition and an event, and a next try after an exponential backoff;
// after the last try the phase is Error and no try follows until the
// RetryAnnotation changes.
//
// A Ready definition is verified again when a new manager pod serves on the
// node (a restart or a reboot: a changed boot ID is reported as a Rebooted
// event), when a multihost volume of the pool does not list the node yet,
// and every re-verify period. While no manager pod serves, a Ready
// definition stays Ready: the host is still defined.
//
// Undefine, when the node leaves (its Node is deleted, the DaemonSet would
// no longer run there, or no StorageClass names the pool any more), deletes
// the HostDefinition, so the node is no longer a multihost target. It never
// touches the node's directories or any PersistentVolume. It is blocked for
// every node by Config.AllowDelete=false, and for one node by the
// AvoidDeletionLabel on the Node (copied onto its definitions, so it still
// counts once the Node is gone); a blocked undefine sets the
// UndefineBlocked condition and emits an event.
package controller
