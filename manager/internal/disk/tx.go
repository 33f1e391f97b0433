package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/quota"
)

// Every call on one volume works through a volumeTx, which owns what the
// calls have in common: the volume's pool, its lock, the clone state, the
// directory and its owner record as the call found them, and the caller's
// node. A call checks what it is given (see names.go), then
//
//	tx, err := s.begin(poolName, name, remote, toGrow)
//	if err != nil {
//		return nil, err
//	}
//	defer tx.end()
//
// and takes its own steps on tx. The intent (toRead, toCreate, ...) says
// what begin checks on the way in; the decisions several verbs share
// (ownedBy, mayCreate) and the answer (describe) are methods of the
// transaction. A call that must ask the API server before it locks (a
// remote create) or that locks the same volume more than once (a clone)
// holds a volumeRef from Store.volume, and begins it when it is ready.

// intent is what a call does to the volume it opens (see volumeRef.begin).
type intent struct {
	// lock serialises the call with every other locked call on the
	// volume; every write takes it, a read does not.
	lock bool
	// idle refuses the call while a clone reads or writes the volume
	// (Conflict): every write but a clone's own steps.
	idle bool
	// existing: the directory must exist (else NotFound, before its
	// owner record is read).
	existing bool
	// remote names the write in a remote caller's refusal ("create",
	// "delete", ...; see checkRemote); "" checks no caller.
	remote string
}

// The intents of the calls.
var (
	toRead   = intent{existing: true}
	toCreate = intent{lock: true, idle: true, remote: "create"}
	toGrow   = intent{lock: true, idle: true, existing: true, remote: "grow"}
	toReown  = intent{lock: true, idle: true, existing: true, remote: "change the owner record of"}
	toDelete = intent{lock: true, idle: true, remote: "delete"}
	// toClone is a clone call's look at its target, which its own job
	// keeps busy while it copies.
	toClone = intent{lock: true, remote: "create"}
	// toHold is a clone's hold on its source, and on its target when the
	// copy starts: checked by the clone itself.
	toHold = intent{lock: true}
)

// volumeRef is the volume a call is about: the volume name of pool p,
// for a caller of node remote (see checkRemote; "" for this node's
// callers and admins). It is made by Store.volume, which checks the
// names; its begin opens a volumeTx.
type volumeRef struct {
	s      *Store
	p      *pool
	name   string
	remote string
}

// volumeTx is one call's hold on its volume: the pool root open, the
// volume's lock held (for a write), and what the call found there. end
// releases it.
type volumeTx struct {
	volumeRef
	root *os.Root
	// fi is the directory as Lstat saw it, when it exists; rec is its
	// owner record (nil: none).
	fi     fs.FileInfo
	exists bool
	rec    *record
	unlock func()
	// enf is the pool's size enforcement, detected once per call
	// (enforcer).
	enf quota.Enforcer
}

// enforcer is how the pool enforces sizes, detected at the first use in
// the call (quota.Detect probes the filesystem) and the same for the rest
// of it.
func (tx *volumeTx) enforcer() quota.Enforcer {
	if tx.enf == nil {
		tx.enf = tx.s.sizes.detect(tx.root)
	}
	return tx.enf
}

// volume returns the volume name of pool poolName for a caller of node
// remote: BadRequest for an invalid pool or volume name, PoolNotFound for
// a pool that is not configured. Nothing is locked or read until begin.
func (s *Store) volume(poolName, name, remote string) (volumeRef, error) {
	if err := checkVolumeNames(poolName, name); err != nil {
		return volumeRef{}, err
	}
	p, err := s.lookup(poolName)
	if err != nil {
		return volumeRef{}, err
	}
	return volumeRef{s: s, p: p, name: name, remote: remote}, nil
}

// begin is volume and volumeRef.begin in one: the prologue of a call.
func (s *Store) begin(poolName, name, remote string, in intent) (*volumeTx, error) {
	v, err := s.volume(poolName, name, remote)
	if err != nil {
		return nil, err
	}
	return v.begin(in)
}

// key is the volume's lock key.
func (v volumeRef) key() string { return v.p.key(v.name) }

// begin opens the volume for a call of intent in: it takes the volume's
// lock (in.lock), opens the pool root (PoolNotFound when its directory is
// missing), refuses a volume that a clone reads or writes (in.idle:
// Conflict), reads the directory (NotFound when in.existing and it is
// missing; Conflict when it is not a directory) and its owner record, and
// refuses a remote caller's write on a node-mode volume (in.remote:
// Forbidden, see checkRemote). On error nothing is held; else the caller
// defers end. A volume may be begun again after end (a clone's steps
// each lock it anew).
func (v volumeRef) begin(in intent) (*volumeTx, error) {
	tx := &volumeTx{volumeRef: v, unlock: func() {}}
	if in.lock {
		tx.unlock = v.s.lock(v.key())
	}
	root, err := v.p.open()
	if err != nil {
		tx.unlock()
		return nil, err
	}
	tx.root = root
	if err := tx.enter(in); err != nil {
		tx.end()
		return nil, err
	}
	return tx, nil
}

// enter takes begin's checks and reads, once the pool root is open.
func (tx *volumeTx) enter(in intent) error {
	if in.idle {
		if err := tx.s.notCloning(tx.p, tx.name); err != nil {
			return err
		}
	}
	if err := tx.read(); err != nil {
		return err
	}
	if in.existing && !tx.exists {
		return notFoundf("volume %q not found in pool %q", tx.name, tx.p.name)
	}
	rec, err := tx.p.record(tx.root, tx.name)
	if err != nil {
		return err
	}
	tx.rec = rec
	if in.remote != "" {
		return tx.checkRemote(in.remote)
	}
	return nil
}

// end closes the pool root and unlocks the volume.
func (tx *volumeTx) end() {
	tx.root.Close()
	tx.unlock()
}

// read looks at the entry name of the pool root: whether it exists, and
// Conflict when it is not a directory.
func (tx *volumeTx) read() error {
	fi, err := tx.root.Lstat(tx.name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		tx.fi, tx.exists = nil, false
		return nil
	case err != nil:
		return fmt.Errorf("stat volume %q in pool %q: %w", tx.name, tx.p.name, err)
	case !fi.IsDir():
		return conflictf("%q in pool %q is %s, not a volume directory", tx.name, tx.p.name, kindOf(fi))
	}
	tx.fi, tx.exists = fi, true
	return nil
}

// lockIn locks the volume for a step that works in root, a pool root its
// caller opened and keeps (a clone puts its copy in place in the pool
// root it copied into): the caller reads what it needs, and calls unlock
// rather than end.
func (v volumeRef) lockIn(root *os.Root) *volumeTx {
	return &volumeTx{volumeRef: v, root: root, unlock: v.s.lock(v.key())}
}

// lock takes the lock of key (a volume's, volumeRef.key; PreparePool
// takes its pool's name) and returns its release.
func (s *Store) lock(key string) (unlock func()) {
	s.locks.LockKey(key)
	return func() { _ = s.locks.UnlockKey(key) } // never fails for a hashed KeyMutex
}

// logger is ctx's logger with the volume and the owner the call is for.
func (v volumeRef) logger(ctx context.Context, owner string) klog.Logger {
	return klog.LoggerWithValues(klog.FromContext(ctx), "pool", v.p.name, "volume", v.name, "owner", owner)
}

// checkRemote refuses a remote caller's write (what it does: "create",
// "delete", ...) on the volume unless its owner record says multihost.
// tx.remote is the node of a caller whose token is bound to a pod (or a
// node) other than this manager's: the server's auth.Decision.Remote; ""
// for this node's callers and admins, who pass. Node-scoped authority, as
// the kubelet's NodeRestriction: a node changes another node's volumes
// only where multihost fan-out and backfill need it. Without a record
// there is nothing a remote caller could take from another node: the
// calls that make one check the request instead. The check is made under
// the volume's lock with the record the write acts on, so the mode cannot
// change between the check and the write.
func (tx *volumeTx) checkRemote(what string) error {
	if tx.remote == "" || tx.rec == nil || tx.rec.Multihost {
		return nil
	}
	return forbiddenf("a caller bound to node %q cannot %s volume %q in pool %q on node %q: it is a node-mode volume, which only node %q's own callers (or an admin) may change; another node may change only multihost volumes",
		tx.remote, what, tx.name, tx.p.name, tx.s.nodeName, tx.s.nodeName)
}

// ownedBy refuses a change on behalf of owner (a resize, a delete) of a
// directory that is not owner's: one without an owner record
// (OwnerConflict with no owner: it must be adopted first) or with
// another owner's (OwnerConflict naming it).
func (tx *volumeTx) ownedBy(owner string) error {
	switch {
	case tx.rec == nil:
		return ownerConflictf("", "directory %q in pool %q has no owner record: adopt it first with PUT /v1/pools/%s/volumes/%s/owner", tx.name, tx.p.name, tx.p.name, tx.name)
	case tx.rec.Owner != owner:
		return ownerConflictf(tx.rec.Owner, "directory %q in pool %q belongs to PersistentVolume %q, not %q", tx.name, tx.p.name, tx.rec.Owner, owner)
	}
	return nil
}

// mayCreate refuses a create (or a clone) req that meets what it would
// not make: another owner's record (OwnerConflict naming it), a directory
// without a record (OwnerConflict with no owner: it must be adopted
// first), or a record of the same owner that does not say what req asks.
// A create confirms a record, it never rewrites one: the record must have
// the same mode (multihost or not), claim namespace and reclaim policy,
// and a size at least the one requested: equal, or larger once an
// expansion grew the volume (volumes only grow, so a record below the
// request was never made by this request). A record planted by another
// node, or left by an older version, is Conflict with what differs, and
// stays as it is.
func (tx *volumeTx) mayCreate(req managerapi.CreateVolumeRequest) error {
	rec := tx.rec
	switch {
	case rec != nil && rec.Owner != req.Owner:
		return ownerConflictf(rec.Owner, "directory %q in pool %q belongs to PersistentVolume %q", tx.name, tx.p.name, rec.Owner)
	case rec == nil && tx.exists:
		return ownerConflictf("", "directory %q in pool %q exists without an owner record; it must be adopted with PUT /v1/pools/%s/volumes/%s/owner", tx.name, tx.p.name, tx.p.name, tx.name)
	case rec == nil:
		return nil
	}
	diffs := req.Differences(rec.Owner, rec.Multihost, rec.ClaimNamespace)
	if rec.ReclaimPolicy != req.ReclaimPolicy {
		diffs = append(diffs, fmt.Sprintf("reclaim policy %q, not %q", rec.ReclaimPolicy, req.ReclaimPolicy))
	}
	if req.RequiredBytes > rec.SizeBytes {
		diffs = append(diffs, fmt.Sprintf("size %s, less than the %s requested", formatBytes(rec.SizeBytes), formatBytes(req.RequiredBytes)))
	}
	if len(diffs) == 0 {
		return nil
	}
	return conflictf("volume %q in pool %q has an owner record for PersistentVolume %q that does not match the request: it says %s; a create never rewrites an owner record (an admin can check the directory and remove it)",
		tx.name, tx.p.name, rec.Owner, strings.Join(diffs, ", "))
}

// describe returns the existing volume as the API shows it, with its
// usage where its size is enforced.
func (tx *volumeTx) describe() *managerapi.Volume {
	v := tx.p.volume(tx.name, tx.fi, tx.rec)
	usage(&v, tx.enforcer(), tx.root, tx.name, tx.rec)
	return &v
}
