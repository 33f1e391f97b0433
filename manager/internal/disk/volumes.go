package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/quota"
)

// ListVolumes returns the volume directories of a pool with their owners,
// sorted by name: with opts (at most one), the page of those whose names
// sort after opts.Continue, at most opts.Limit of them (0: all), with
// Continue set to the last one's name when more may follow; without, all
// of them. Entries that are not directories or whose names are not valid
// volume names (the metadata directory among them) are not volumes and
// are left out, and so are owner records without a directory. A record
// that cannot be read fails the whole listing rather than show its
// directory as unowned. Only the page's volumes are looked at (lstat,
// owner record, usage), so a page costs its size plus reading the pool's
// names.
func (s *Store) ListVolumes(ctx context.Context, poolName string, opts ...managerapi.ListOptions) (*managerapi.VolumeList, error) {
	var page managerapi.ListOptions
	switch len(opts) {
	case 0:
	case 1:
		page = opts[0]
	default:
		return nil, fmt.Errorf("list pool %q: %d list options, want at most one", poolName, len(opts))
	}
	if page.Limit < 0 {
		return nil, badRequestf("limit %d is negative", page.Limit)
	}
	p, err := s.pool(poolName)
	if err != nil {
		return nil, err
	}
	root, err := p.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	dir, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("open pool %q: %w", p.name, err)
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read pool %q: %w", p.name, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Name() > page.Continue && ValidateVolumeName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	list := &managerapi.VolumeList{Items: []managerapi.Volume{}}
	enf := s.sizes.detect(root)
	for _, name := range names {
		if page.Limit > 0 && len(list.Items) == page.Limit {
			// More may follow: those left may all be gone by the
			// next call, which then answers an empty last page.
			list.Continue = list.Items[len(list.Items)-1].Name
			break
		}
		fi, err := root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			return nil, fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
		}
		if !fi.IsDir() {
			continue
		}
		rec, err := p.record(root, name)
		if err != nil {
			return nil, err
		}
		v := p.volume(name, fi, rec)
		usage(&v, enf, root, name, rec)
		list.Items = append(list.Items, v)
	}
	return list, nil
}

// GetVolume returns one volume directory with its owner.
func (s *Store) GetVolume(ctx context.Context, poolName, name string) (*managerapi.Volume, error) {
	tx, err := s.begin(poolName, name, "", toRead)
	if err != nil {
		return nil, err
	}
	defer tx.end()
	return tx.describe(), nil
}

// SetSize grows the volume name of owner to sizeBytes: the growth must fit
// in what the pool has available (else InsufficientStorage, nothing
// changed); where the volume's size is enforced, its limit grows first,
// then the owner record. A smaller size than the recorded one is Conflict
// (volumes never shrink); the same size changes nothing. A volume made
// without a size gets one (all of it is growth). A remote caller (see
// checkRemote) may grow only a multihost volume, and only as far as its
// PersistentVolume goes, read fresh from the API server (see
// checkRemoteGrowth: Conflict otherwise, nothing changed).
func (s *Store) SetSize(ctx context.Context, poolName, name, owner string, sizeBytes int64, remote string) (*managerapi.Volume, error) {
	if err := badRequest(managerapi.SetSizeRequest{Owner: owner, SizeBytes: sizeBytes}.Validate()); err != nil {
		return nil, err
	}
	tx, err := s.begin(poolName, name, remote, toGrow)
	if err != nil {
		return nil, err
	}
	defer tx.end()
	if err := tx.ownedBy(owner); err != nil {
		return nil, err
	}
	if sizeBytes < tx.rec.SizeBytes {
		return nil, conflictf("volume %q in pool %q has size %s; it cannot shrink to %s", name, tx.p.name, formatBytes(tx.rec.SizeBytes), formatBytes(sizeBytes))
	}
	if err := tx.checkRemoteGrowth(ctx, sizeBytes); err != nil {
		return nil, err
	}
	if sizeBytes > tx.rec.SizeBytes {
		if err := tx.grow(tx.logger(ctx, owner), sizeBytes); err != nil {
			return nil, err
		}
	}
	return tx.describe(), nil
}

// grow grows the volume to sizeBytes, more than its recorded size: the
// growth is promised by the pool (else InsufficientStorage), the limit
// raised where the size is enforced, then the owner record rewritten.
func (tx *volumeTx) grow(logger klog.Logger, sizeBytes int64) error {
	rec := tx.rec
	growth := sizeBytes - rec.SizeBytes
	request := fmt.Sprintf("%s more requested to grow volume %q from %s to %s", formatBytes(growth), tx.name, formatBytes(rec.SizeBytes), formatBytes(sizeBytes))
	if err := tx.s.sizes.reserve(tx.p, tx.root, tx.s.nodeName, growth, rec.SizeBytes == 0, request); err != nil {
		return err
	}
	next := *rec
	next.SizeBytes = sizeBytes
	enf := tx.enforcer()
	if id := quotaID(enf, tx.root, tx.name, rec); id != 0 {
		if err := enf.SetLimit(tx.root, tx.name, id, sizeBytes); err != nil {
			tx.s.sizes.unreserve(tx.p, growth, rec.SizeBytes == 0)
			return fmt.Errorf("set the %s quota of volume %q in pool %q to %s: %w", rec.Enforcement, tx.name, tx.p.name, formatBytes(sizeBytes), err)
		}
		next.QuotaID = id
	}
	if err := writeRecord(tx.root, tx.name, next); err != nil {
		// The limit stays raised: the larger promise is kept too.
		return fmt.Errorf("write owner record of volume %q in pool %q: %w", tx.name, tx.p.name, err)
	}
	logger.Info("Grew volume", "from", rec.SizeBytes, "to", sizeBytes, "enforcement", rec.Enforcement)
	tx.rec = &next
	return nil
}

// CreateVolume makes the directory name in the pool for the PersistentVolume
// req.Owner, with exactly mode (whatever the umask), and reports whether it
// made the directory. req.ReclaimPolicy (managerapi.ReclaimDelete,
// managerapi.ReclaimRetain or ""), req.ClaimNamespace (a DNS label or "") and
// req.RequiredBytes are the owner's reclaim policy, its claim's namespace
// and the volume's size, all kept in the owner record of a new directory.
// A create never rewrites an existing record: it only confirms one that
// says what it asks (see volumeTx.mayCreate).
//
//   - No owner record and no directory: the size must fit in what the pool
//     has available (see sizes), else InsufficientStorage; where the pool
//     cannot enforce sizes, req.EnforceSize fails with NotEnforced. Then
//     the record naming the owner is written, and the directory is made:
//     with a quota limiting it to its size where the pool enforces sizes.
//   - A record naming owner: unless it has the mode, claim namespace and
//     reclaim policy asked, and at least the size asked, Conflict saying
//     what differs (mayCreate), nothing changed; else the directory
//     is made if missing (a crash between record and directory) and gets
//     mode.
//   - A record naming another PersistentVolume: OwnerConflict naming it.
//   - A directory without a record: OwnerConflict with no owner; the
//     directory must be adopted with SetOwner first.
//   - Anything but a directory with that name (a file, a symlink): Conflict.
//
// A new record says multihost when req.Multihost does. A remote caller
// (see checkRemote) may create only with req.Multihost, and may not touch
// a directory whose record is node mode: both are Forbidden; it must name
// the claim (req.ClaimNamespace and req.ClaimName), which the API server
// must know as the owner's (checkRemoteClaim), before anything is read or
// written.
func (s *Store) CreateVolume(ctx context.Context, poolName, name string, req managerapi.CreateVolumeRequest, mode fs.FileMode, remote string) (*managerapi.Volume, bool, error) {
	if err := checkCreate(req, mode); err != nil {
		return nil, false, err
	}
	v, err := s.volume(poolName, name, remote)
	if err != nil {
		return nil, false, err
	}
	if err := v.checkRemoteCreate("create", req); err != nil {
		return nil, false, err
	}
	if err := v.checkRemoteClaim(ctx, "create", claimOfCreate(req)); err != nil {
		return nil, false, err
	}
	tx, err := v.begin(toCreate)
	if err != nil {
		return nil, false, err
	}
	defer tx.end()
	if err := tx.mayCreate(req); err != nil {
		return nil, false, err
	}
	logger := tx.logger(ctx, req.Owner)
	created := !tx.exists
	if created {
		newRec := record{Owner: req.Owner, ReclaimPolicy: req.ReclaimPolicy, ClaimNamespace: req.ClaimNamespace, SizeBytes: req.RequiredBytes, Multihost: req.Multihost}
		if err := tx.make(logger, newRec, req.EnforceSize); err != nil {
			return nil, false, err
		}
	}
	if err := tx.setMode(mode); err != nil {
		return nil, false, err
	}
	if created {
		// V(4): the server logs each volume created, with who asked.
		logger.V(4).Info("Created volume", "mode", managerapi.FormatMode(mode), "sizeBytes", tx.rec.SizeBytes, "enforcement", tx.rec.Enforcement)
	}
	return tx.describe(), created, nil
}

// make makes the missing directory, owner-only until setMode gives it its
// mode, and gives it its SELinux context. Unless the record naming the
// same owner is already there (it is kept as it is: a crash came between
// record and directory), the new record's size is reserved in the pool
// first (with enforceSize, only on a pool that enforces sizes) and newRec,
// dated now, is written as the owner record. Where the pool enforces
// sizes, the directory is made with a quota limiting it to the record's
// size, and the record gets the quota's ID. When the directory cannot be
// made, or made but not labelled, what it made is undone: the directory,
// its quota, the record it wrote, the reservation.
func (tx *volumeTx) make(logger klog.Logger, newRec record, enforceSize bool) error {
	root, name := tx.root, tx.name
	enf := tx.enforcer()
	sup := enf.Support()
	undoRecord := func() {}
	if tx.rec == nil {
		var err error
		if undoRecord, err = tx.ownNew(logger, newRec, enforceSize, sup); err != nil {
			return err
		}
	}
	rec := tx.rec
	var quotaID uint64
	if rec.Enforcement != "" && rec.Enforcement == sup.Kind {
		id, err := enf.Make(root, name, rec.SizeBytes)
		if err != nil {
			undoRecord()
			return fmt.Errorf("create volume %q in pool %q with a %s quota of %s: %w", name, tx.p.name, rec.Enforcement, formatBytes(rec.SizeBytes), err)
		}
		quotaID = id
	} else if err := root.Mkdir(name, 0o700); err != nil {
		undoRecord()
		return fmt.Errorf("create volume %q in pool %q: %w", name, tx.p.name, err)
	}
	undoDir := func() {
		// Remove never follows a symlink and never removes a directory
		// that is not empty.
		if rerr := removeEmpty(root, name); rerr != nil {
			logger.Error(rerr, "Cannot remove a volume directory that was not completed")
			return
		}
		if quotaID != 0 {
			if rerr := enf.Release(root, quotaID); rerr != nil {
				logger.Error(rerr, "Cannot release the quota of a volume that was not completed", "quotaID", quotaID)
			}
		}
		undoRecord()
	}
	if quotaID != 0 && rec.QuotaID != quotaID {
		next := *rec
		next.QuotaID = quotaID
		if err := writeRecord(root, name, next); err != nil {
			undoDir()
			return fmt.Errorf("record the quota of volume %q in pool %q: %w", name, tx.p.name, err)
		}
		tx.rec = &next
	}
	if err := tx.label(); err != nil {
		undoDir()
		return err
	}
	return nil
}

// ownNew reserves newRec's size in the pool (with enforceSize, only on a
// pool that enforces sizes: sup says how it does) and writes newRec, dated
// now and with the pool's enforcement when it has a size, as the owner
// record of the volume, which becomes tx.rec. undo removes that record
// and gives the size back.
func (tx *volumeTx) ownNew(logger klog.Logger, newRec record, enforceSize bool, sup quota.Support) (undo func(), err error) {
	s, p := tx.s, tx.p
	if enforceSize && sup.Kind == quota.KindNone {
		return nil, managerapi.Errorf(managerapi.ReasonNotEnforced, "pool %q on node %q does not enforce volume sizes (the class asks for enforceSize): %s", p.name, s.nodeName, sup.Reason)
	}
	if err := s.sizes.reserve(p, tx.root, s.nodeName, newRec.SizeBytes, true, formatBytes(newRec.SizeBytes)+" requested"); err != nil {
		return nil, err
	}
	if newRec.SizeBytes > 0 {
		newRec.Enforcement = sup.Kind
	}
	newRec.OwnedSince = s.now()
	if err := writeRecord(tx.root, tx.name, newRec); err != nil {
		s.sizes.unreserve(p, newRec.SizeBytes, true)
		return nil, fmt.Errorf("write owner record of volume %q in pool %q: %w", tx.name, p.name, err)
	}
	tx.rec = &newRec
	return func() {
		if rerr := removeRecord(tx.root, tx.name); rerr != nil {
			logger.Error(rerr, "Cannot remove the owner record of a volume that was not created")
			return
		}
		s.sizes.unreserve(p, newRec.SizeBytes, true)
	}, nil
}

// label gives the new directory its SELinux context through a descriptor
// of the very directory that Lstat saw, which becomes tx.fi.
func (tx *volumeTx) label() error {
	root, name, p := tx.root, tx.name, tx.p
	fi, err := root.Lstat(name)
	if err != nil {
		return fmt.Errorf("stat new volume %q in pool %q: %w", name, p.name, err)
	}
	f, err := root.Open(name)
	if err != nil {
		return fmt.Errorf("open new volume %q in pool %q: %w", name, p.name, err)
	}
	defer f.Close()
	ffi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat new volume %q in pool %q: %w", name, p.name, err)
	}
	if !os.SameFile(fi, ffi) {
		return conflictf("volume %q in pool %q changed while it was being created", name, p.name)
	}
	if err := tx.s.labeler.Label(f); err != nil {
		return fmt.Errorf("label new volume %q in pool %q for SELinux: %w", name, p.name, err)
	}
	tx.fi, tx.exists = fi, true
	return nil
}

// setMode gives the directory exactly mode, through a descriptor of the
// very directory that Lstat saw (tx.fi), so a directory swapped for a
// symlink meanwhile is never chmod-ed. tx.fi becomes its new state.
func (tx *volumeTx) setMode(mode fs.FileMode) error {
	root, name, p := tx.root, tx.name, tx.p
	f, err := root.Open(name)
	if err != nil {
		return fmt.Errorf("open volume %q in pool %q: %w", name, p.name, err)
	}
	defer f.Close()
	ffi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	if !os.SameFile(tx.fi, ffi) {
		return conflictf("volume %q in pool %q changed while it was being created", name, p.name)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("set mode %s on volume %q in pool %q: %w", managerapi.FormatMode(mode), name, p.name, err)
	}
	if ffi, err = f.Stat(); err != nil {
		return fmt.Errorf("stat volume %q in pool %q: %w", name, p.name, err)
	}
	tx.fi = ffi
	return nil
}

// SetOwner replaces the owner record of the existing directory name: a
// compare-and-swap where req.Previous must be the current owner ("" when
// the directory has no record, to adopt it), else OwnerConflict names the
// current owner. The new record names req.Owner, keeps its date when the
// owner does not change, and says whether the directory is retained
// (req.Retained). Its reclaim policy is req.ReclaimPolicy when set
// (managerapi.ReclaimDelete or managerapi.ReclaimRetain, else BadRequest), whether
// or not the owner changes. When it is empty, the same owner keeps the
// recorded policy, and a change of owner (adoption, hand-over of a retained
// directory) clears it: the recorded one was the previous owner's, and with
// none the directory of a missing owner is only ever removed when empty.
// The claim namespace goes the same way: req.ClaimNamespace when set (a
// DNS label, else BadRequest; an administrator hands a retained directory
// over to another namespace so), else the recorded one for the same owner
// and none for a new owner. The record says multihost when it did or
// req.Multihost does (a mode that never goes back). It is rewritten only
// when its owner, retained flag, reclaim policy, claim namespace or mode
// changes. req.ClaimName (a DNS subdomain or "", else BadRequest) is not
// recorded. A remote caller (see checkRemote) may change only a record
// that says multihost, or adopt a directory without a record with
// req.Multihost, and then only for the claim req names (req.ClaimNamespace
// and req.ClaimName, required), which the API server must know as the
// owner's, of a multihost class (see checkRemoteClaim); it never hands a
// record to another owner nor changes its claim namespace, and lets a
// directory be removed later only as its PV does (see checkRemoteOwner).
func (s *Store) SetOwner(ctx context.Context, poolName, name string, req managerapi.SetOwnerRequest, remote string) (*managerapi.Volume, error) {
	if err := badRequest(req.Validate()); err != nil {
		return nil, err
	}
	tx, err := s.begin(poolName, name, remote, toReown)
	if err != nil {
		return nil, err
	}
	defer tx.end()
	if err := tx.mayReown(ctx, req); err != nil {
		return nil, err
	}
	rec, next := tx.rec, nextOwnerRecord(tx.rec, req, s.now())
	if err := tx.checkRemoteOwner(ctx, next); err != nil {
		return nil, err
	}
	if rec == nil || rec.Owner != next.Owner || rec.Retained != next.Retained || rec.ReclaimPolicy != next.ReclaimPolicy ||
		rec.ClaimNamespace != next.ClaimNamespace || rec.Multihost != next.Multihost {
		if err := writeRecord(tx.root, name, next); err != nil {
			return nil, fmt.Errorf("write owner record of volume %q in pool %q: %w", name, tx.p.name, err)
		}
	}
	logger := tx.logger(ctx, req.Owner)
	if previous := ownerOf(rec); previous != req.Owner {
		logger.Info("Changed volume owner", "previous", previous, "retained", next.Retained, "reclaimPolicy", next.ReclaimPolicy, "claimNamespace", next.ClaimNamespace, "multihost", next.Multihost)
	} else {
		logger.V(2).Info("Updated volume owner record", "retained", next.Retained, "reclaimPolicy", next.ReclaimPolicy, "claimNamespace", next.ClaimNamespace, "multihost", next.Multihost)
	}
	v := tx.p.volume(name, tx.fi, &next)
	return &v, nil
}

// mayReown refuses an owner change req unless the record names
// req.Previous (a compare-and-swap: OwnerConflict naming the current
// owner), and a remote caller's adoption of a directory without a record
// unless req asks for a multihost one (Forbidden) for a claim the API
// server knows as the owner's (see checkRemoteClaim).
func (tx *volumeTx) mayReown(ctx context.Context, req managerapi.SetOwnerRequest) error {
	if tx.remote != "" && tx.rec == nil && !req.Multihost {
		return forbiddenf("a caller bound to node %q may adopt on node %q only multihost volumes (\"multihost\": true): directory %q in pool %q has no owner record",
			tx.remote, tx.s.nodeName, tx.name, tx.p.name)
	}
	switch current := ownerOf(tx.rec); {
	case current == req.Previous:
	case current == "":
		return ownerConflictf("", "directory %q in pool %q has no owner record, not one naming %q; adopt it with previous owner \"\"", tx.name, tx.p.name, req.Previous)
	default:
		return ownerConflictf(current, "directory %q in pool %q belongs to PersistentVolume %q, not %q", tx.name, tx.p.name, current, req.Previous)
	}
	if tx.rec != nil {
		return nil
	}
	return tx.checkRemoteClaim(ctx, "adopt", forClaim{owner: req.Owner, namespace: req.ClaimNamespace, name: req.ClaimName})
}

// nextOwnerRecord is the record SetOwner writes over rec (nil for none)
// for req at now: see SetOwner for what it keeps of rec.
func nextOwnerRecord(rec *record, req managerapi.SetOwnerRequest, now time.Time) record {
	next := record{Owner: req.Owner, OwnedSince: now, Retained: req.Retained, Multihost: req.Multihost}
	if rec != nil {
		// The size, quota and mode are the directory's, whoever owns it.
		next.SizeBytes, next.Enforcement, next.QuotaID = rec.SizeBytes, rec.Enforcement, rec.QuotaID
		next.Multihost = next.Multihost || rec.Multihost
		if rec.Owner == req.Owner {
			next.OwnedSince, next.ReclaimPolicy, next.ClaimNamespace = rec.OwnedSince, rec.ReclaimPolicy, rec.ClaimNamespace
		}
	}
	if req.ReclaimPolicy != "" {
		next.ReclaimPolicy = req.ReclaimPolicy
	}
	if req.ClaimNamespace != "" {
		next.ClaimNamespace = req.ClaimNamespace
	}
	return next
}

// DeleteVolume removes the directory name, everything in it and its owner
// record from the pool on behalf of owner, and reports whether there was
// anything to remove.
//
//   - A record naming owner: the directory is removed, then the record. With
//     ifEmpty, a directory holding anything is NotEmpty and stays. A record
//     without a directory is removed (true).
//   - No record and no directory: nothing to do (false, nil).
//   - A pool that is not configured, or whose directory does not exist:
//     PoolNotFound, not "nothing to do": the caller must not take it for
//     a removed directory, which may still be there when the pool is back
//     (a pool root not mounted yet, a pool configured again).
//   - A record naming another PersistentVolume: OwnerConflict naming it.
//   - A directory without a record: OwnerConflict with no owner; adopt it
//     first.
//   - Anything but a directory with that name: Conflict, left alone.
//   - A filesystem mounted on or below the directory (per the mount table):
//     Conflict naming the mount points, nothing removed.
//
// Symlinks inside the tree are removed, never followed; trees of any depth
// are removed with a bounded number of open files. When ctx ends, the
// removal stops (wrapping ctx.Err()) with the record still in place, so a
// later call finishes it. A remote caller (see checkRemote) may delete
// only a multihost volume, and only once its PersistentVolume lets it go
// (see checkRemoteRemoval: Conflict otherwise, nothing removed).
func (s *Store) DeleteVolume(ctx context.Context, poolName, name, owner string, ifEmpty bool, remote string) (bool, error) {
	if err := validateOwner(owner); err != nil {
		return false, err
	}
	tx, err := s.begin(poolName, name, remote, toDelete)
	if err != nil {
		return false, err
	}
	defer tx.end()
	if tx.rec == nil && !tx.exists {
		return false, nil
	}
	if err := tx.ownedBy(owner); err != nil {
		return false, err
	}
	if err := tx.checkRemoteRemoval(ctx); err != nil {
		return false, err
	}
	logger := tx.logger(ctx, owner)
	if !tx.exists {
		if err := tx.forget(tx.enforcer(), tx.rec.QuotaID); err != nil {
			return false, err
		}
		logger.V(2).Info("Removed the owner record of a volume without a directory")
		return true, nil
	}
	if err := tx.remove(ctx, ifEmpty); err != nil {
		return false, err
	}
	// V(4): the server logs each volume deleted, with who asked.
	logger.V(4).Info("Removed volume", "ifEmpty", ifEmpty)
	return true, nil
}

// remove removes the existing directory, unless a filesystem is mounted
// inside or, with ifEmpty, it holds anything; then (see forget) its quota
// and its owner record, once the directory's removal is on disk.
func (tx *volumeTx) remove(ctx context.Context, ifEmpty bool) error {
	root, name, p := tx.root, tx.name, tx.p
	if err := tx.s.checkNoMounts(p, name); err != nil {
		return err
	}
	if ifEmpty {
		empty, err := isEmptyDir(root, name)
		if err != nil {
			return fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
		}
		if !empty {
			return managerapi.Errorf(managerapi.ReasonNotEmpty, "volume %q in pool %q is not empty", name, p.name)
		}
	}
	// The quota ID is read before the directory goes, should the record
	// not have it.
	enf := tx.enforcer()
	id := quotaID(enf, root, name, tx.rec)
	if err := removeTree(ctx, root, name); err != nil {
		return fmt.Errorf("remove volume %q from pool %q: %w", name, p.name, err)
	}
	if _, err := root.Lstat(name); err == nil {
		return fmt.Errorf("volume %q in pool %q still exists after removal", name, p.name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check removal of volume %q in pool %q: %w", name, p.name, err)
	}
	// The directory's removal must reach the disk before the record's: a
	// record without a directory is harmless, a directory without a record
	// needs adopting.
	if err := syncDir(root, "."); err != nil {
		return fmt.Errorf("pool %q: %w", p.name, err)
	}
	return tx.forget(enf, id)
}

// forget releases the quota id of the removed volume (0: none), then
// removes its owner record tx.rec and takes back the size the pool
// promised it. A quota that cannot be released keeps the record, so that
// a later delete releases it.
func (tx *volumeTx) forget(enf quota.Enforcer, id uint64) error {
	root, name, p, rec := tx.root, tx.name, tx.p, tx.rec
	if id != 0 && rec.Enforcement == enf.Support().Kind {
		if err := enf.Release(root, id); err != nil {
			return fmt.Errorf("release the %s quota %d of volume %q in pool %q: %w", rec.Enforcement, id, name, p.name, err)
		}
	}
	// Loaded first, so that the promise that loses the record counted it.
	if err := tx.s.sizes.load(p, root); err != nil {
		return err
	}
	if err := removeRecord(root, name); err != nil {
		return fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
	}
	tx.s.sizes.unreserve(p, rec.SizeBytes, true)
	return nil
}

// checkNoMounts fails with Conflict when the mount table lists a mount
// point on or below the volume directory (by its configured path and by its
// path with symlinks resolved). Device numbers would not do: a btrfs
// subvolume has its own without being a mount.
func (s *Store) checkNoMounts(p *pool, name string) error {
	points, err := readMountPoints(s.mountInfo)
	if err != nil {
		return fmt.Errorf("volume %q in pool %q: cannot tell whether filesystems are mounted inside: %w", name, p.name, err)
	}
	dirs := []string{filepath.Join(p.path, name)}
	if real, err := filepath.EvalSymlinks(p.path); err == nil && real != p.path {
		dirs = append(dirs, filepath.Join(real, name))
	}
	if inside := mountsInside(points, dirs...); len(inside) > 0 {
		return conflictf("volume %q in pool %q has filesystems mounted inside (%s); unmount them first", name, p.name, strings.Join(inside, ", "))
	}
	return nil
}

// isEmptyDir reports whether the directory name of root has no entries.
func isEmptyDir(root *os.Root, name string) (bool, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return false, fmt.Errorf("open directory: %w", err)
	}
	defer f.Close()
	entries, err := f.ReadDir(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read directory: %w", err)
	}
	return len(entries) == 0, nil
}
