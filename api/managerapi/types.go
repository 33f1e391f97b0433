// Package client is the hostpath manager's API contract: the JSON types of
// its HTTP API, the rules its names follow, and a typed Go client for it.
// The provisioner and the host definer talk to managers through it, and
// package trust below it holds the CA bundle they trust the managers by.
// It is the only contract between the programs; the code they share to run
// (hostpath.dev/api/runtime) is not part of it.
package managerapi

import (
	"fmt"
	"net/http"
	"time"
)

// APIGroup is the RBAC API group the manager authorises callers against with
// SubjectAccessReview. A caller needs a ClusterRole rule on this group (see
// docs/api.md, "ClusterRoles").
const APIGroup = "hostpath.dev"

// The ClusterRoles, installed by manifests/, that grant the permissions the
// manager checks; bind a caller's service account to one with a
// ClusterRoleBinding. Each caller holds only the verbs it uses.
const (
	// ClientClusterRole is the provisioner's: get hosts, every verb on
	// pools/volumes, and the writes of pools/multihostvolumes (its
	// multihost fan-out calls every node's manager).
	ClientClusterRole = "hostpath-manager-client"
	// HostDefinerClusterRole is the host definer's: get hosts, update
	// pools, list, create and update (adopt) pools/volumes, and create and
	// update pools/multihostvolumes (backfill on the nodes it defines); no
	// resize, no delete.
	HostDefinerClusterRole = "hostpath-manager-hostdefiner"
	// ReaderClusterRole reads: get hosts, get and list pools/volumes (the
	// kubectl hostpath orphans plugin's service account, OrphansServiceAccount).
	ReaderClusterRole = "hostpath-manager-reader"
	// AdminClusterRole is an operator's, for debugging with a token not
	// bound to a pod (`kubectl create token SA --audience
	// hostpath.dev/manager`): every verb the manager checks, and the writes
	// of hosts/admin that such a token needs to change anything.
	AdminClusterRole = "hostpath-manager-admin"
	// MetricsReaderClusterRole may get the nonResourceURL /metrics, which
	// every hostpath program serves only to such callers (the
	// PodMonitors' token, of service account hostpath-metrics).
	MetricsReaderClusterRole = "hostpath-metrics-reader"
)

// OrphansServiceAccount is the service account, in the product's
// namespace, bound to ReaderClusterRole, whose token the kubectl hostpath
// orphans plugin requests by default.
const OrphansServiceAccount = "hostpath-orphans"

// RBAC resources the manager checks with SubjectAccessReview. RBAC's
// resourceNames match whole names, so volume calls are authorised on their
// pool: resource "pools", subresource "volumes", name the pool. A grant for
// one pool is then one rule with resources ["pools/volumes"] and
// resourceNames [POOL].
const (
	// ResourceHosts is checked with verb "get" (name: the node) for GET
	// /v1/host.
	ResourceHosts = "hosts"
	// ResourcePools is checked with verb "update" (name: the pool) for PUT
	// /v1/pools/{pool}, and is the resource of every volume call.
	ResourcePools = "pools"
	// SubresourceVolumes is the subresource of ResourcePools checked for
	// the /v1/pools/{pool}/volumes routes (name: the pool), with verbs
	// "list", "get", "create", "update" (the owner record), "resize" (the
	// size: a verb of its own, so that a caller may adopt without growing)
	// and "delete".
	SubresourceVolumes = "volumes"
	// SubresourceMultihostVolumes is the subresource of ResourcePools
	// checked, besides SubresourceVolumes, for a volume write (verbs
	// "create", "update", "resize", "delete"; name: the pool) whose token
	// is bound to a pod, or a node, other than the manager's node. Only
	// multihost volumes can be changed that way: a node never changes
	// another node's node-mode volumes (see docs/security.md).
	SubresourceMultihostVolumes = "multihostvolumes"
	// SubresourceAdmin is the subresource of ResourceHosts checked,
	// besides the route's own permission, for a write (verbs "create",
	// "update", "resize", "delete"; name: the node) whose token is bound
	// to no pod and no node: `kubectl create token` without
	// --bound-object-kind. Such tokens read with the route's permission
	// alone.
	SubresourceAdmin = "admin"
)

// The keys of a TokenReview's status.user.extra (and of a
// CertificateSigningRequest's spec.extra) that the API server fills from a
// service account token bound to a pod: the pod's name and UID and its
// node's name. A token bound to a Node object carries ExtraNodeName alone.
const (
	ExtraPodName  = "authentication.kubernetes.io/pod-name"
	ExtraPodUID   = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName = "authentication.kubernetes.io/node-name"
)

// TokenAudience is the audience a bearer token sent to the manager must be
// issued for (a projected service account token, or `kubectl create token
// SA --audience hostpath.dev/manager`). A token for the API server's own
// audience is refused, so a stolen manager token is worth nothing to the API
// server and the reverse.
const TokenAudience = "hostpath.dev/manager"

// Host is the body of GET /v1/host: who the manager's node is and what its
// storage pools hold.
type Host struct {
	// NodeName is the Kubernetes node the manager runs on.
	NodeName string `json:"nodeName"`
	// HostID is a random identifier generated once and persisted in the
	// manager's state directory. Two nodes reporting the same HostID are a
	// cloned host.
	HostID string `json:"hostID"`
	// BootID changes at every boot of the host (/proc/sys/kernel/random/boot_id).
	BootID string `json:"bootID"`
	// MachineID is the host's /etc/machine-id, empty when unreadable.
	MachineID string `json:"machineID,omitempty"`
	// Pools lists the storage pools, sorted by name: those configured
	// with --pool NAME=PATH and those named on the fly under --pool-root
	// whose directories exist.
	Pools []Pool `json:"pools"`
	// Certificate describes the manager's serving certificate and its
	// renewal; absent when the manager serves without TLS
	// (--insecure-skip-auth).
	Certificate *CertificateStatus `json:"certificate,omitempty"`
}

// CertificateStatus describes the serving certificate a manager holds (it
// got it through a CertificateSigningRequest of signer SignerName) and the
// state of its renewal. A manager whose renewal fails keeps serving with
// its certificate while it is valid, retries with backoff, and says so in
// RenewalError.
type CertificateStatus struct {
	// NotBefore and NotAfter bound the certificate's validity; absent
	// while the manager holds no certificate (it then serves nothing on
	// /v1).
	NotBefore *time.Time `json:"notBefore,omitempty"`
	NotAfter  *time.Time `json:"notAfter,omitempty"`
	// RenewAfter is when the manager asks for a new certificate: at 70%
	// of the certificate's life.
	RenewAfter *time.Time `json:"renewAfter,omitempty"`
	// Issuer is the common name of the CA that signed the certificate.
	Issuer string `json:"issuer,omitempty"`
	// RenewalError is why the last attempt to get a certificate failed
	// (a denied or unanswered CSR, say); empty once an attempt succeeds.
	RenewalError string `json:"renewalError,omitempty"`
	// RenewalErrorTime is when that attempt failed.
	RenewalErrorTime *time.Time `json:"renewalErrorTime,omitempty"`
}

// Pool describes one storage pool: a named directory on the host under which
// volume directories are created.
type Pool struct {
	// Name is the pool's name, as configured with --pool NAME=PATH or as
	// named by PUT /v1/pools/{pool} under --pool-root.
	Name string `json:"name"`
	// Path is the pool's absolute path on the host.
	Path string `json:"path"`
	// CapacityBytes is the size of the filesystem holding the pool.
	CapacityBytes int64 `json:"capacityBytes"`
	// FreeBytes is what an unprivileged writer can still use on it.
	FreeBytes int64 `json:"freeBytes"`
	// Inodes is the filesystem's total inode count (0 when not reported).
	Inodes int64 `json:"inodes"`
	// FreeInodes is the filesystem's free inode count.
	FreeInodes int64 `json:"freeInodes"`
	// Enforcement is how the pool's filesystem enforces volume sizes
	// (EnforcementBtrfs, EnforcementXFS, EnforcementExt4), or empty when
	// it does not: a volume can then outgrow its claim's size.
	Enforcement string `json:"enforcement,omitempty"`
	// EnforcementReason says, when Enforcement is empty, why the pool does
	// not enforce sizes and what would make it.
	EnforcementReason string `json:"enforcementReason,omitempty"`
	// PromisedBytes is the sum of the sizes of the pool's volumes, as
	// their owner records hold them (volumes made without a size count
	// nothing).
	PromisedBytes int64 `json:"promisedBytes"`
	// OvercommitRatio is how many times its capacity the pool may promise
	// (--pool-overcommit; 1 unless set).
	OvercommitRatio float64 `json:"overcommitRatio"`
	// AvailableBytes is the largest size a new volume can have now: the
	// smaller of FreeBytes and CapacityBytes × OvercommitRatio −
	// PromisedBytes (never negative).
	AvailableBytes int64 `json:"availableBytes"`
	// ReadOnly says that the pool's filesystem, or the mount the manager
	// sees it through, is read-only (statfs reports ST_RDONLY: mounted ro,
	// or remounted read-only after errors): no volume can be created in
	// it, and its volumes cannot be written.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Error is set when the pool's statistics could not be read (for
	// example, the path does not exist yet).
	Error string `json:"error,omitempty"`
}

// Volume is one volume directory in a pool.
type Volume struct {
	// Name is the directory's name inside the pool.
	Name string `json:"name"`
	// Pool is the pool's name.
	Pool string `json:"pool"`
	// Path is the directory's absolute path on the host, what a PV's
	// hostPath points at.
	Path string `json:"path"`
	// Mode is the directory's permission bits in octal, e.g. "0777".
	Mode string `json:"mode"`
	// Owner is the PersistentVolume the directory belongs to, from the
	// manager's owner record; empty for a directory without a record (made
	// before owner records existed, and not adopted yet).
	Owner string `json:"owner,omitempty"`
	// OwnedSince is when the owner record was written.
	OwnedSince *time.Time `json:"ownedSince,omitempty"`
	// Retained says that the owner was deleted with reclaim policy Retain:
	// the directory keeps its data until someone reuses or removes it.
	Retained bool `json:"retained,omitempty"`
	// ReclaimPolicy is the owner's reclaim policy as recorded at creation
	// ("Delete" or "Retain"; empty for records made without one). A node
	// that finds the directory of a PV that no longer exists removes it
	// only when the policy is Delete.
	ReclaimPolicy string `json:"reclaimPolicy,omitempty"`
	// ClaimNamespace is the namespace the directory may be reused from
	// (hostpath.dev/reuse-directory): that of the claim its owner was
	// made for, or the one an administrator handed it over to; empty for
	// records made without one (by older versions), whose directory no
	// claim can reuse until it is handed over.
	ClaimNamespace string `json:"claimNamespace,omitempty"`
	// Multihost says the owner record is of a multihost volume
	// (CreateVolumeRequest.Multihost, SetOwnerRequest.Multihost): the only
	// volumes that a caller bound to another node may change.
	Multihost bool `json:"multihost,omitempty"`
	// SizeBytes is the volume's size as its owner record holds it: what
	// the pool has promised it, and its limit where the pool enforces
	// sizes; 0 for a volume made without a size.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Enforcement is how the volume's size is enforced (EnforcementBtrfs,
	// EnforcementXFS, EnforcementExt4), empty when it is not.
	Enforcement string `json:"enforcement,omitempty"`
	// UsedBytes is the space the volume uses, as its quota counts it;
	// absent when its size is not enforced.
	UsedBytes *int64 `json:"usedBytes,omitempty"`
	// UsedInodes is the number of inodes the volume uses, as its quota
	// counts it; absent when not counted (btrfs counts none).
	UsedInodes *int64 `json:"usedInodes,omitempty"`
	// CloneOf is the volume this one was cloned from, "<pool>/<name>";
	// CloneMethod how (CloneMethodSnapshot, CloneMethodReflink or
	// CloneMethodCopy). Both are empty for a volume that is no clone.
	CloneOf     string `json:"cloneOf,omitempty"`
	CloneMethod string `json:"cloneMethod,omitempty"`
}

// How pools enforce volume sizes (Pool.Enforcement, Volume.Enforcement).
const (
	// EnforcementBtrfs: each volume is a btrfs subvolume whose level-1
	// qgroup carries the limit (simple quotas, so subvolumes made inside
	// count too).
	EnforcementBtrfs = "btrfs"
	// EnforcementXFS: each volume directory has its own XFS project quota.
	EnforcementXFS = "xfs"
	// EnforcementExt4: each volume directory has its own ext4 project
	// quota.
	EnforcementExt4 = "ext4"
)

// VolumeList is the body of GET /v1/pools/{pool}/volumes: one page of
// the pool's volumes (see ListOptions).
type VolumeList struct {
	// Items are the pool's volumes, sorted by name: those after the
	// page's ListOptions.Continue, at most its ListOptions.Limit.
	Items []Volume `json:"items"`
	// Continue, when not empty, says that more volumes follow: the next
	// page is the same call with query continue=<Continue>. It is empty
	// on the last page (and in the answers of managers older than
	// paging, which list every volume at once). It is the name of the
	// page's last volume; callers pass it on as it is.
	Continue string `json:"continue,omitempty"`
}

// ListOptions are the query parameters of GET /v1/pools/{pool}/volumes,
// paged as the Kubernetes API's lists are: a page holds the volumes whose
// names sort after Continue, at most Limit, and says with
// VolumeList.Continue where the next one starts. A volume that exists
// during the whole paging is listed exactly once; one created or removed
// meanwhile may be listed or not.
type ListOptions struct {
	// Limit (query "limit", 1 to MaxListLimit) is the most volumes a page
	// holds; without it a page holds DefaultListLimit.
	Limit int
	// Continue (query "continue") is the VolumeList.Continue of the
	// previous page; without it the page starts at the first volume.
	Continue string
}

// Page sizes of GET /v1/pools/{pool}/volumes.
const (
	// DefaultListLimit is the size of a page when the query gives no
	// limit. A caller that does not follow VolumeList.Continue sees only
	// the first DefaultListLimit volumes: Client.ListVolumes follows it.
	DefaultListLimit = 500
	// MaxListLimit is the largest limit a query may give: a page of
	// MaxListLimit volumes with the longest names, owners and paths
	// (4 KiB) stays under the 4 MiB a Client reads of an answer.
	MaxListLimit = 500
)

// CreateVolumeRequest is the body of PUT /v1/pools/{pool}/volumes/{name}.
type CreateVolumeRequest struct {
	// Owner is the PersistentVolume the directory is for (required). A new
	// directory gets an owner record naming it; an existing directory
	// must already belong to Owner, or the call fails with 409 and reason
	// OwnerConflict.
	Owner string `json:"owner"`
	// Mode is the permission bits in octal ("0777" when empty). An existing
	// directory gets this mode too.
	Mode string `json:"mode,omitempty"`
	// ReclaimPolicy is the owner's reclaim policy ("Delete" or "Retain"),
	// kept in the owner record of a new directory; optional.
	ReclaimPolicy string `json:"reclaimPolicy,omitempty"`
	// ClaimNamespace is the namespace of the claim the owner is made for
	// (a DNS label, else 400), kept in the owner record of a new
	// directory; optional. A retained directory is reused only from it.
	ClaimNamespace string `json:"claimNamespace,omitempty"`
	// RequiredBytes, when positive, makes the call fail with 507 and reason
	// InsufficientStorage if the pool has less free space, unless the
	// directory already exists.
	RequiredBytes int64 `json:"requiredBytes,omitempty"`
	// EnforceSize makes the call fail with 422 and reason NotEnforced when
	// the pool cannot enforce RequiredBytes as the volume's limit, instead
	// of creating a volume that can outgrow it.
	EnforceSize bool `json:"enforceSize,omitempty"`
	// Multihost says the directory is one copy of a multihost volume; a
	// new directory's owner record keeps it (Volume.Multihost). A caller
	// whose token is bound to another node than the manager's may create
	// only with Multihost, and only where no node-mode record exists.
	Multihost bool `json:"multihost,omitempty"`
	// ClaimName is the name of the claim the owner is made for, in
	// ClaimNamespace (a DNS subdomain name, else 400); optional for this
	// node's callers and admins, required (with ClaimNamespace; else 400)
	// from a caller whose token is bound to another node: the manager
	// then checks with the API server that the claim exists, is not being
	// deleted and is Owner's (Owner is "pvc-<the claim's UID>", or a
	// PersistentVolume bound to it), else 409 Conflict. It is not kept in
	// the owner record.
	ClaimName string `json:"claimName,omitempty"`
}

// CloneVolumeRequest is the body of PUT
// /v1/pools/{pool}/volumes/{name}/clone: make the volume as a copy of
// another volume of this node (a claim whose dataSource is a claim). The
// caller needs verb "create" on the target pool's volumes and "get" on the
// source pool's.
type CloneVolumeRequest struct {
	// CreateVolumeRequest says what the new volume is, as for PUT
	// .../volumes/{name}; RequiredBytes must be at least the source's
	// recorded size.
	CreateVolumeRequest
	// SourcePool and SourceName name the volume to copy; SourceOwner must
	// be its owner (the source claim's PersistentVolume), or the call
	// fails with 409 and reason OwnerConflict. A source whose record names
	// another claim namespace than ClaimNamespace is 403, and a caller
	// bound to another node may clone only a multihost source into a
	// multihost volume.
	SourcePool  string `json:"sourcePool"`
	SourceName  string `json:"sourceName"`
	SourceOwner string `json:"sourceOwner"`
}

// Clone is the answer of PUT /v1/pools/{pool}/volumes/{name}/clone: 202
// Accepted while the copy runs (call again to follow it), 201 Created by
// the first call that sees it done, 200 once the volume exists. A manager
// that restarts mid-copy throws the half copy away, and the next call
// starts over: the volume directory appears only when its copy is whole.
type Clone struct {
	// Source is the source volume, "<pool>/<name>".
	Source string `json:"source"`
	// State is CloneQueued, CloneCopying or CloneDone.
	State string `json:"state"`
	// Method is how the copy is made (CloneMethodSnapshot,
	// CloneMethodReflink or CloneMethodCopy), once known.
	Method string `json:"method,omitempty"`
	// CopiedBytes and TotalBytes say how far the copy is (a snapshot
	// copies nothing byte by byte: both stay 0).
	CopiedBytes int64 `json:"copiedBytes"`
	TotalBytes  int64 `json:"totalBytes"`
	// StartedAt is when the copy started.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// Seconds is how long the copy took, once done.
	Seconds float64 `json:"seconds,omitempty"`
	// Volume is the new volume, once done.
	Volume *Volume `json:"volume,omitempty"`
}

// The states of a Clone.
const (
	// CloneQueued: the copy waits for a free slot (--clone-concurrency).
	CloneQueued = "Queued"
	// CloneCopying: the copy runs.
	CloneCopying = "Copying"
	// CloneDone: the volume exists.
	CloneDone = "Done"
)

// How a clone's content is made (Clone.Method, Volume.CloneMethod).
const (
	// CloneMethodSnapshot: a btrfs snapshot of the source subvolume.
	CloneMethodSnapshot = "snapshot"
	// CloneMethodReflink: every file's data shared with the source
	// (FICLONE, on btrfs or XFS with reflink) until either is written.
	CloneMethodReflink = "reflink"
	// CloneMethodCopy: the bytes were copied.
	CloneMethodCopy = "copy"
)

// SetSizeRequest is the body of PUT /v1/pools/{pool}/volumes/{name}/size:
// it grows an existing volume (claim expansion).
type SetSizeRequest struct {
	// Owner must be the directory's owner, or the call fails with 409 and
	// reason OwnerConflict.
	Owner string `json:"owner"`
	// SizeBytes is the new size: at least the recorded one (a smaller size
	// is 409 Conflict: volumes never shrink); the growth must fit in the
	// pool's AvailableBytes (else 507 InsufficientStorage). Where the pool
	// enforces sizes, the limit grows with it.
	SizeBytes int64 `json:"sizeBytes"`
}

// SetOwnerRequest is the body of PUT /v1/pools/{pool}/volumes/{name}/owner:
// a compare-and-swap of an existing directory's owner record.
type SetOwnerRequest struct {
	// Owner is the PersistentVolume the directory belongs to from now on.
	Owner string `json:"owner"`
	// Previous must be the current owner ("" for a directory without an
	// owner record), or the call fails with 409 and reason OwnerConflict.
	// Owner == Previous only updates Retained, ReclaimPolicy and
	// ClaimNamespace.
	Previous string `json:"previous"`
	// Retained marks the directory as kept after its owner was deleted with
	// reclaim policy Retain.
	Retained bool `json:"retained,omitempty"`
	// ReclaimPolicy, when set ("Delete" or "Retain"; anything else is 400),
	// is the reclaim policy the new owner record keeps, whether or not the
	// owner changes. When empty, the same owner keeps the recorded policy
	// and a change of owner clears it (the recorded policy was the previous
	// owner's).
	ReclaimPolicy string `json:"reclaimPolicy,omitempty"`
	// ClaimNamespace, when set (a DNS label; anything else is 400), is the
	// namespace the new owner record keeps, whether or not the owner
	// changes: the only namespace from which a claim can reuse the
	// directory. An administrator hands a retained directory over to
	// another namespace with Owner == Previous and this field. When
	// empty, the same owner keeps the recorded namespace and a change of
	// owner clears it (it was the previous owner's claim's).
	ClaimNamespace string `json:"claimNamespace,omitempty"`
	// Multihost marks the record as of a multihost volume
	// (Volume.Multihost); a record so marked stays marked. Without it the
	// record keeps its mode. A caller bound to another node may adopt a
	// directory without a record only with Multihost, and may not mark a
	// node-mode record.
	Multihost bool `json:"multihost,omitempty"`
	// ClaimName is the name of the claim Owner is made for, in
	// ClaimNamespace (a DNS subdomain name, else 400); optional, except
	// for the adoption of a directory without a record (Previous "") by a
	// caller whose token is bound to another node, which needs it and
	// ClaimNamespace (else 400): the manager then checks with the API
	// server, as for CreateVolumeRequest.ClaimName, that the claim
	// exists, is not being deleted, is Owner's and is of a multihost
	// StorageClass, else 409 Conflict. It is not kept in the owner
	// record.
	ClaimName string `json:"claimName,omitempty"`
}

// DeleteOptions are the query parameters of DELETE
// /v1/pools/{pool}/volumes/{name}.
type DeleteOptions struct {
	// Owner (query "owner", required) must be the directory's owner; a
	// directory that belongs to another PersistentVolume, or to none, is
	// left alone with 409 and reason OwnerConflict.
	Owner string
	// IfEmpty (query "ifEmpty=true") removes the directory only when it
	// holds nothing; otherwise the answer is 409 with reason NotEmpty.
	IfEmpty bool
}

// Reason is the machine-readable cause of an API error.
type Reason string

// The reasons an API error carries, each with its HTTP status.
const (
	// ReasonBadRequest (400): a malformed body, an invalid name or mode.
	ReasonBadRequest Reason = "BadRequest"
	// ReasonUnauthorized (401): no bearer token, or TokenReview rejected it.
	ReasonUnauthorized Reason = "Unauthorized"
	// ReasonForbidden (403): SubjectAccessReview denied the call, or the
	// caller's authority does not reach the volume (a token bound to
	// another node, for a node-mode volume; a token of a pod that is gone;
	// a token bound to no pod, for a write without the admin permission).
	ReasonForbidden Reason = "Forbidden"
	// ReasonNotFound (404): no such volume or route. A pool that is
	// missing is ReasonPoolNotFound instead.
	ReasonNotFound Reason = "NotFound"
	// ReasonPoolNotFound (404): the pool is not configured on the node (nor
	// can it be named on the fly there), or its directory does not exist
	// (prepare it with PUT /v1/pools/{pool}). A DELETE answers it too: a
	// missing pool is never taken for a removed volume.
	ReasonPoolNotFound Reason = "PoolNotFound"
	// ReasonMethodNotAllowed (405): the route exists, the method does not.
	ReasonMethodNotAllowed Reason = "MethodNotAllowed"
	// ReasonConflict (409): something that is not a volume directory (a
	// file, a symlink) already has the name, or a filesystem is mounted
	// inside the volume.
	ReasonConflict Reason = "Conflict"
	// ReasonOwnerConflict (409): the directory belongs to another
	// PersistentVolume (Status.Owner names it), or has no owner record
	// where one is needed (Status.Owner is empty).
	ReasonOwnerConflict Reason = "OwnerConflict"
	// ReasonNotEmpty (409): a delete with IfEmpty found data in the
	// directory.
	ReasonNotEmpty Reason = "NotEmpty"
	// ReasonRequestTooLarge (413): the body is over the size limit.
	ReasonRequestTooLarge Reason = "RequestTooLarge"
	// ReasonTooManyRequests (429): the caller's address has too many
	// requests in flight or token reviews; retry after the Retry-After
	// header's seconds.
	ReasonTooManyRequests Reason = "TooManyRequests"
	// ReasonInsufficientStorage (507): the pool has less free space than
	// requested.
	ReasonInsufficientStorage Reason = "InsufficientStorage"
	// ReasonNotEnforced (422): a create with EnforceSize on a pool that
	// cannot enforce sizes; the message says why it cannot.
	ReasonNotEnforced Reason = "NotEnforced"
	// ReasonInternal (500): anything else; the message says what failed.
	ReasonInternal Reason = "Internal"
)

// HTTPStatus returns the HTTP status code that goes with the reason.
func (r Reason) HTTPStatus() int {
	switch r {
	case ReasonBadRequest:
		return http.StatusBadRequest
	case ReasonUnauthorized:
		return http.StatusUnauthorized
	case ReasonForbidden:
		return http.StatusForbidden
	case ReasonNotFound, ReasonPoolNotFound:
		return http.StatusNotFound
	case ReasonMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case ReasonConflict, ReasonOwnerConflict, ReasonNotEmpty:
		return http.StatusConflict
	case ReasonTooManyRequests:
		return http.StatusTooManyRequests
	case ReasonRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case ReasonInsufficientStorage:
		return http.StatusInsufficientStorage
	case ReasonNotEnforced:
		return http.StatusUnprocessableEntity
	default:
		return http.StatusInternalServerError
	}
}

// Status is the JSON body of every error response.
type Status struct {
	// Reason is machine-readable.
	Reason Reason `json:"reason"`
	// Message is for people: what failed and, where it helps, what to do.
	Message string `json:"message"`
	// Owner is the directory's current owner, with reason OwnerConflict
	// ("" when it has none).
	Owner string `json:"owner,omitempty"`
}

// Differences says how a volume's owner record differs from what the
// create req asked, in the three things a create never changes and both
// ends check (the manager when a create meets a record, the provisioner
// when it reads the answer): the owner, the mode (multihost or not) and
// the claim namespace, as "owner "x", not "y"" and alike; none when the
// record is the one asked for.
func (req CreateVolumeRequest) Differences(owner string, multihost bool, claimNamespace string) []string {
	var diffs []string
	if owner != req.Owner {
		diffs = append(diffs, fmt.Sprintf("owner %q, not %q", owner, req.Owner))
	}
	if multihost != req.Multihost {
		diffs = append(diffs, fmt.Sprintf("multihost %v, not %v", multihost, req.Multihost))
	}
	if claimNamespace != req.ClaimNamespace {
		diffs = append(diffs, fmt.Sprintf("claim namespace %q, not %q", claimNamespace, req.ClaimNamespace))
	}
	return diffs
}
