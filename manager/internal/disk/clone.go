package disk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/clone"
	"hostpath.dev/manager/internal/quota"
)

// Clones: PUT /v1/pools/{pool}/volumes/{name}/clone (CloneVolume) makes a
// volume as a copy of another volume of the node. The copy runs in the
// background, into a staging directory at the top of the pool,
//
//	<pool>/.hostpath-clone-<hash of the volume name>
//
// (a name that starts with '.', so never a volume's, and in the same
// directory as the volume, so that the final rename stays in one directory
// and one filesystem). The volume's owner record is written first, which
// reserves the name and its size for the new owner; the staging directory
// is renamed to the volume's name only when the copy is whole. So a volume
// directory is never half a clone: a manager that dies mid-copy leaves a
// staging directory, which the next clone in the pool (or PreparePool)
// removes, and a record without a directory, from which the next call of
// the same owner starts over.
//
// While a clone runs, its source and its target are busy: a delete of the
// source is refused (Conflict), so the copy never reads a volume that is
// being removed, and so is every other write of the target.

// stagingPrefix starts the names of the staging directories of clones.
const stagingPrefix = ".hostpath-clone-"

// stagingName is the staging directory of the clone into volume name.
func stagingName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return stagingPrefix + hex.EncodeToString(sum[:16])
}

// DefaultCloneConcurrency is how many copies a Store runs at once unless
// Config.CloneConcurrency says otherwise.
const DefaultCloneConcurrency = 2

// clones are a Store's clone jobs.
type clones struct {
	// start serialises the start of clones, so that the checks of a
	// source and of a target, each under its own volume lock, hold
	// together.
	start sync.Mutex
	mu    sync.Mutex
	// jobs are the jobs by target key (pool.key), until a call sees them
	// end.
	jobs map[string]*cloneJob
	// busy counts the running jobs that read (source) or write (target)
	// each volume key.
	busy map[string]int
	// swept says which pools had their staging directories removed by
	// this process.
	swept map[string]bool
	// slots bounds the copies that run at once.
	slots chan struct{}
	// beforeCopy, when set (tests), runs when a copy has its slot.
	beforeCopy func()
	// limits bound the trees that clones by copy take on (zero fields:
	// clone's defaults); tests lower them.
	limits clone.Limits
}

// cloneJob is one clone: its progress, then its outcome.
type cloneJob struct {
	owner, source string
	copied, total atomic.Int64
	// The fields below are guarded by clones.mu.
	state   string
	method  string
	started time.Time
	seconds float64
	ended   bool
	err     error
}

// status is what the API answers about j.
func (c *clones) status(j *cloneJob) *managerapi.Clone {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := &managerapi.Clone{Source: j.source, State: j.state, Method: j.method, CopiedBytes: j.copied.Load(), TotalBytes: j.total.Load(), Seconds: j.seconds}
	if !j.started.IsZero() {
		t := j.started
		cl.StartedAt = &t
	}
	return cl
}

// isBusy reports whether a running clone reads or writes the volume key.
func (c *clones) isBusy(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy[key] > 0
}

// notCloning fails with Conflict while a clone reads or writes volume name
// of p: the writes other than the clone's own wait until it is done.
func (s *Store) notCloning(p *pool, name string) error {
	if s.clones.isBusy(p.key(name)) {
		return conflictf("volume %q in pool %q is being cloned (as the source or the target of a clone); try again when the clone is done", name, p.name)
	}
	return nil
}

// CloneVolume makes volume name of pool poolName, for req.Owner, as a copy
// of volume req.SourceName of pool req.SourcePool, in the background. The
// first call checks the source (its owner must be req.SourceOwner, its
// claim namespace that of req, and a remote caller may clone only a
// multihost volume into a multihost volume), writes the new volume's owner
// record and starts the copy; calls made while it runs answer its
// progress; the first call after it ended answers its outcome (created:
// true, or the copy's error, after which the next call starts over); later
// calls answer the volume. As a create, a clone never rewrites an owner
// record: one of the same owner must say what req asks (mayCreate, else
// Conflict). A remote caller must name the claim (req.ClaimNamespace and
// req.ClaimName, else BadRequest before anything is read), which the API
// server must know as the owner's, of a multihost class
// (checkRemoteClaim, Conflict otherwise), before a copy starts, that is
// before a record is written; the calls that follow a copy, or find it
// made, change nothing and ask the API server nothing. See the comment on
// stagingPrefix for what a restart leaves.
func (s *Store) CloneVolume(ctx context.Context, poolName, name string, req managerapi.CloneVolumeRequest, mode fs.FileMode, remote string) (*managerapi.Clone, bool, error) {
	if err := checkClone(poolName, name, req, mode); err != nil {
		return nil, false, err
	}
	target, err := s.volume(poolName, name, remote)
	if err != nil {
		return nil, false, err
	}
	if err := target.checkRemoteCreate("clone into", req.CreateVolumeRequest); err != nil {
		return nil, false, err
	}
	source, err := s.volume(req.SourcePool, req.SourceName, remote)
	if err != nil {
		return nil, false, err
	}
	if cl, created, err, done := s.cloneState(target, req); done {
		return cl, created, err
	}
	// A copy has to start: checked outside the start lock, as the API
	// server may take a while, and before anything is written.
	if err := target.checkRemoteClaim(ctx, "clone into", claimOfCreate(req.CreateVolumeRequest)); err != nil {
		return nil, false, err
	}
	s.clones.start.Lock()
	defer s.clones.start.Unlock()
	// Checked again under start: another call may have started it.
	if cl, created, err, done := s.cloneState(target, req); done {
		return cl, created, err
	}
	if err := s.holdSource(source, req); err != nil {
		return nil, false, err
	}
	j, err := s.startClone(ctx, target, source, req, mode)
	if err != nil {
		s.clones.release(source.key())
		return nil, false, err
	}
	return s.clones.status(j), false, nil
}

// cloneState answers a clone call from what exists: done is false when a
// copy has to start. Under the target's lock: a running job answers its
// progress; an ended one its outcome, once; an existing volume of the
// same owner is the clone (a volume of another owner, or a directory
// without a record, is OwnerConflict). An owner record of the same owner,
// that of a running copy, of a copy that a restart interrupted or of a
// volume in place, must say what req asks (mayCreate: Conflict, nothing
// changed), as for a create.
func (s *Store) cloneState(target volumeRef, req managerapi.CloneVolumeRequest) (cl *managerapi.Clone, created bool, err error, done bool) {
	tx, err := target.begin(toClone)
	if err != nil {
		return nil, false, err, true
	}
	defer tx.end()
	j, running, jobErr := s.clones.look(target.key())
	switch {
	case j != nil && j.owner != req.Owner:
		return nil, false, ownerConflictf(j.owner, "volume %q in pool %q is being cloned for PersistentVolume %q", tx.name, tx.p.name, j.owner), true
	case j != nil && !running && jobErr != nil:
		return nil, false, jobErr, true
	}
	if err := tx.mayCreate(req.CreateVolumeRequest); err != nil {
		return nil, false, err, true
	}
	switch {
	case running:
		// The copy is in its staging directory: the volume is not.
		return s.clones.status(j), false, nil, true
	case !tx.exists:
		return nil, false, nil, false
	}
	v := tx.describe()
	cl = &managerapi.Clone{Source: req.SourcePool + "/" + req.SourceName, State: managerapi.CloneDone, Method: tx.rec.CloneMethod, Seconds: tx.rec.CloneSeconds, Volume: v}
	if j != nil {
		cl = s.clones.status(j)
		cl.Volume = v
	}
	return cl, j != nil, nil, true
}

// look returns the job of the target key (nil: none), whether it was
// running and its error when looked at, once: it may end meanwhile, and
// is then answered by the next call. An ended job is answered once: look
// forgets it.
func (c *clones) look(key string) (j *cloneJob, running bool, jobErr error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j = c.jobs[key]
	if j == nil {
		return nil, false, nil
	}
	if j.ended {
		delete(c.jobs, key)
	}
	return j, !j.ended, j.err
}

// holdSource checks, under its lock, that the source volume exists and
// belongs to req.SourceOwner, that its claim namespace (when recorded) is
// req's, and that a remote caller clones a multihost source; then marks
// it busy, so that it is not deleted while it is copied.
func (s *Store) holdSource(source volumeRef, req managerapi.CloneVolumeRequest) error {
	tx, err := source.begin(toHold)
	if err != nil {
		return err
	}
	defer tx.end()
	rec, name, pool := tx.rec, tx.name, tx.p.name
	switch {
	case !tx.exists || rec == nil:
		return notFoundf("source volume %q does not exist in pool %q on node %q", name, pool, s.nodeName)
	case rec.Owner != req.SourceOwner:
		return ownerConflictf(rec.Owner, "source volume %q in pool %q belongs to PersistentVolume %q, not %q", name, pool, rec.Owner, req.SourceOwner)
	case rec.Retained:
		return conflictf("source volume %q in pool %q is retained: its PersistentVolume %q was deleted", name, pool, rec.Owner)
	case rec.ClaimNamespace != "" && rec.ClaimNamespace != req.ClaimNamespace:
		return forbiddenf("source volume %q in pool %q belongs to a claim of namespace %q; a clone for namespace %q may not copy it", name, pool, rec.ClaimNamespace, req.ClaimNamespace)
	case req.RequiredBytes < rec.SizeBytes:
		return conflictf("the clone asks for %s, less than the %s of source volume %q in pool %q", formatBytes(req.RequiredBytes), formatBytes(rec.SizeBytes), name, pool)
	case tx.remote != "" && !rec.Multihost:
		return forbiddenf("a caller bound to node %q may clone on node %q only multihost volumes: volume %q in pool %q is of node mode", tx.remote, s.nodeName, name, pool)
	}
	s.clones.hold(source.key())
	return nil
}

// hold and release count a running clone's use of a volume key.
func (c *clones) hold(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy[key]++
}

func (c *clones) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(key)
}

// releaseLocked is release with c.mu held.
func (c *clones) releaseLocked(key string) {
	if c.busy[key]--; c.busy[key] <= 0 {
		delete(c.busy, key)
	}
}

// startClone, under the target's lock, writes the new volume's owner
// record (reserving its size), unless one of the same owner is there (a
// clone that a restart interrupted: its quota is released, as its staging
// directory is gone or going), removes the pool's leftover staging
// directories once per process, and starts the copy.
func (s *Store) startClone(ctx context.Context, target, source volumeRef, req managerapi.CloneVolumeRequest, mode fs.FileMode) (*cloneJob, error) {
	from := source.p.name + "/" + source.name
	logger := klog.LoggerWithValues(target.logger(ctx, req.Owner), "source", from)
	tx, err := target.begin(toHold)
	if err != nil {
		return nil, err
	}
	defer tx.end()
	if tx.exists {
		return nil, conflictf("volume %q in pool %q was made while its clone was starting", tx.name, tx.p.name)
	}
	if err := s.sweepStaging(ctx, tx.root, tx.p); err != nil {
		return nil, err
	}
	enf := tx.enforcer()
	if rec := tx.rec; rec == nil {
		newRec := record{Owner: req.Owner, ReclaimPolicy: req.ReclaimPolicy, ClaimNamespace: req.ClaimNamespace, SizeBytes: req.RequiredBytes, Multihost: req.Multihost, CloneOf: from}
		if _, err := tx.ownNew(logger, newRec, req.EnforceSize, enf.Support()); err != nil {
			return nil, err
		}
	} else if rec.QuotaID != 0 && rec.Enforcement == enf.Support().Kind {
		if err := enf.Release(tx.root, rec.QuotaID); err != nil {
			return nil, fmt.Errorf("release the quota %d of the interrupted clone %q in pool %q: %w", rec.QuotaID, tx.name, tx.p.name, err)
		}
		next := *rec
		next.QuotaID = 0
		if err := writeRecord(tx.root, tx.name, next); err != nil {
			return nil, fmt.Errorf("volume %q in pool %q: %w", tx.name, tx.p.name, err)
		}
		tx.rec = &next
	}
	j := &cloneJob{owner: req.Owner, source: from, state: managerapi.CloneQueued}
	s.clones.mu.Lock()
	s.clones.jobs[target.key()] = j
	s.clones.busy[target.key()]++
	s.clones.mu.Unlock()
	go s.runClone(klog.NewContext(context.WithoutCancel(ctx), logger), j, target, source, *tx.rec, mode)
	return j, nil
}

// sweepStaging removes, the first time this process clones into p, the
// staging directories that no running clone of p writes: those a previous
// process left.
func (s *Store) sweepStaging(ctx context.Context, root *os.Root, p *pool) error {
	s.clones.mu.Lock()
	swept := s.clones.swept[p.name]
	s.clones.swept[p.name] = true
	s.clones.mu.Unlock()
	if swept {
		return nil
	}
	return s.removeStaging(ctx, root, p)
}

// sweepPool is sweepStaging for PreparePool, serialised with the start of
// clones.
func (s *Store) sweepPool(ctx context.Context, p *pool) error {
	s.clones.start.Lock()
	defer s.clones.start.Unlock()
	root, err := p.open()
	if err != nil {
		return err
	}
	defer root.Close()
	return s.sweepStaging(ctx, root, p)
}

// removeStaging removes the staging directories of p that no running
// clone writes. They were never volumes: no PersistentVolume names them.
func (s *Store) removeStaging(ctx context.Context, root *os.Root, p *pool) error {
	dir, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("open pool %q: %w", p.name, err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return fmt.Errorf("read pool %q: %w", p.name, err)
	}
	running := map[string]bool{}
	s.clones.mu.Lock()
	for key, j := range s.clones.jobs {
		if !j.ended {
			if pool, name, _ := strings.Cut(key, "/"); pool == p.name {
				running[stagingName(name)] = true
			}
		}
	}
	s.clones.mu.Unlock()
	for _, n := range names {
		if !strings.HasPrefix(n, stagingPrefix) || running[n] {
			continue
		}
		if err := removeTree(ctx, root, n); err != nil {
			return fmt.Errorf("remove the staging directory %s of an interrupted clone in pool %q: %w", n, p.name, err)
		}
		klog.FromContext(ctx).Info("Removed the staging directory of an interrupted clone", "pool", p.name, "directory", n)
	}
	return nil
}

// runClone waits for a slot, copies, and then, under the target's lock,
// either puts the copy in place or undoes it (the staging directory, its
// quota, the owner record); the job ends with the outcome, and source and
// target stop being busy at that same moment: a caller that sees the
// clone done may delete its source at once.
func (s *Store) runClone(ctx context.Context, j *cloneJob, target, source volumeRef, rec record, mode fs.FileMode) {
	logger := klog.FromContext(ctx)
	s.clones.slots <- struct{}{}
	defer func() { <-s.clones.slots }()
	s.clones.mu.Lock()
	j.state, j.started = managerapi.CloneCopying, s.clock.Now()
	s.clones.mu.Unlock()
	if s.clones.beforeCopy != nil {
		s.clones.beforeCopy()
	}
	logger.Info("Cloning volume")
	err := s.copyClone(ctx, j, target, source, rec, mode)
	s.clones.mu.Lock()
	s.clones.releaseLocked(target.key())
	s.clones.releaseLocked(source.key())
	j.ended, j.err, j.seconds = true, err, s.clock.Since(j.started).Seconds()
	if err == nil {
		j.state = managerapi.CloneDone
	}
	s.clones.mu.Unlock()
	if err != nil {
		logger.Error(err, "Failed to clone volume")
		return
	}
	logger.Info("Cloned volume", "method", j.method, "seconds", j.seconds)
}

// copyClone makes the staging directory and copies into it (snapshot,
// reflink or copy), then finishes the clone under the target's lock.
func (s *Store) copyClone(ctx context.Context, j *cloneJob, target, source volumeRef, rec record, mode fs.FileMode) error {
	root, err := target.p.open()
	if err != nil {
		return err
	}
	defer root.Close()
	staging := stagingName(target.name)
	enf := s.sizes.detect(root)
	method, id, err := s.fillStaging(ctx, j, root, enf, target.p, source, staging, rec)
	undo := func() {
		if rerr := removeTree(context.WithoutCancel(ctx), root, staging); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			klog.FromContext(ctx).Error(rerr, "Cannot remove the staging directory of a failed clone", "directory", staging)
			return
		}
		if id != 0 {
			if rerr := enf.Release(root, id); rerr != nil {
				klog.FromContext(ctx).Error(rerr, "Cannot release the quota of a failed clone", "quotaID", id)
			}
		}
	}
	if err != nil {
		undo()
		return s.dropClone(target, root, rec.Owner, err)
	}
	s.clones.mu.Lock()
	j.method = method
	seconds := s.clock.Since(j.started).Seconds()
	s.clones.mu.Unlock()
	tx := target.lockIn(root)
	defer tx.unlock()
	rec.QuotaID, rec.CloneMethod, rec.CloneSeconds = id, method, seconds
	if err := tx.placeClone(staging, rec, mode); err != nil {
		undo()
		return tx.forgetClone(rec, err)
	}
	return nil
}

// fillStaging makes the staging directory with the pool's quota and the
// source's content: a btrfs snapshot of a source subvolume of the same
// pool where the pool's enforcer makes them, else a new directory filled
// by clone.Contents (reflink, else copy). It returns the method and the
// staging directory's quota ID (0: none).
func (s *Store) fillStaging(ctx context.Context, j *cloneJob, root *os.Root, enf quota.Enforcer, p *pool, source volumeRef, staging string, rec record) (string, uint64, error) {
	enforced := rec.Enforcement != "" && rec.Enforcement == enf.Support().Kind
	if snap, ok := enf.(quota.Snapshotter); ok && enforced && source.p.name == p.name {
		id, err := snap.Snapshot(root, source.name, staging, rec.SizeBytes)
		switch {
		case err == nil:
			return managerapi.CloneMethodSnapshot, id, nil
		case !errors.Is(err, quota.ErrNotSubvolume):
			return "", 0, fmt.Errorf("snapshot volume %q of pool %q: %w", source.name, p.name, err)
		}
		klog.FromContext(ctx).Info("Copying instead of a snapshot", "reason", err)
	}
	var id uint64
	if enforced {
		var err error
		if id, err = enf.Make(root, staging, rec.SizeBytes); err != nil {
			return "", 0, fmt.Errorf("make the staging directory of the clone with a %s quota of %s: %w", rec.Enforcement, formatBytes(rec.SizeBytes), err)
		}
	} else if err := root.Mkdir(staging, 0o700); err != nil {
		return "", 0, fmt.Errorf("make the staging directory of the clone: %w", err)
	}
	method, err := s.copyContents(ctx, j, root, source, staging)
	return method, id, err
}

// copyContents copies the source volume's content into the staging
// directory with clone.Contents, counting its progress in j.
func (s *Store) copyContents(ctx context.Context, j *cloneJob, root *os.Root, source volumeRef, staging string) (string, error) {
	sroot, err := source.p.open()
	if err != nil {
		return "", err
	}
	defer sroot.Close()
	src, err := sroot.OpenRoot(source.name)
	if err != nil {
		return "", fmt.Errorf("open source volume %q in pool %q: %w", source.name, source.p.name, err)
	}
	defer src.Close()
	dst, err := root.OpenRoot(staging)
	if err != nil {
		return "", fmt.Errorf("open the staging directory of the clone: %w", err)
	}
	defer dst.Close()
	total, err := clone.Size(ctx, src, s.clones.limits)
	if err != nil {
		return "", source.cloneError(fmt.Errorf("size source volume %q in pool %q: %w", source.name, source.p.name, err))
	}
	j.total.Store(total)
	method, err := clone.Contents(ctx, src, dst, clone.Options{Progress: func(pr clone.Progress) { j.copied.Store(pr.CopiedBytes) }, TotalBytes: total, Limits: s.clones.limits})
	if err != nil {
		return "", source.cloneError(fmt.Errorf("copy source volume %q of pool %q: %w", source.name, source.p.name, err))
	}
	return string(method), nil
}

// cloneError makes the error of a copy of the source beyond clone's
// limits (a source tree too deep, of too many entries or hard links) a
// Conflict that says which limit and where: a refusal that the claim's
// events show and that retrying does not change, not an internal error.
// Other errors are returned as they are.
func (source volumeRef) cloneError(err error) error {
	var le *clone.LimitError
	if !errors.As(err, &le) {
		return err
	}
	return conflictf("source volume %q of pool %q cannot be cloned by copy: %v at %q: %s; see \"Limits\" in docs/clones.md",
		source.name, source.p.name, le.Which, le.Path, le.Detail)
}

// placeClone records the clone's quota and method in its owner record,
// dated now, renames the staging directory to the volume's name, and
// gives it mode and its SELinux context. The record comes first: a crash
// in between leaves a record without a directory, which the next call
// starts over from. The record is dated when the copy is put in place,
// not when it started: an orphan sweeper removes a directory whose record
// is older than its grace period and whose PersistentVolume does not
// exist, and the PersistentVolume of a clone is made only once the copy
// is in place, however long the copy took.
func (tx *volumeTx) placeClone(staging string, rec record, mode fs.FileMode) error {
	root, name := tx.root, tx.name
	rec.OwnedSince = tx.s.now()
	if err := writeRecord(root, name, rec); err != nil {
		return fmt.Errorf("record the clone of volume %q in pool %q: %w", name, tx.p.name, err)
	}
	if err := root.Rename(staging, name); err != nil {
		return fmt.Errorf("put the clone of volume %q in pool %q in place: %w", name, tx.p.name, err)
	}
	err := tx.label()
	if err == nil {
		err = tx.setMode(mode)
	}
	if err != nil {
		// The directory is whole: undone by renaming it back.
		if rerr := root.Rename(name, staging); rerr != nil {
			return errors.Join(err, fmt.Errorf("move the clone back to its staging directory: %w", rerr))
		}
		return err
	}
	return syncDir(root, ".")
}

// dropClone, after a failed copy into root, removes the clone's owner
// record under the target's lock and gives back its size; it returns
// cause.
func (s *Store) dropClone(target volumeRef, root *os.Root, owner string, cause error) error {
	tx := target.lockIn(root)
	defer tx.unlock()
	rec, err := tx.p.record(root, tx.name)
	if err != nil || rec == nil || rec.Owner != owner {
		return errors.Join(cause, err)
	}
	return tx.forgetClone(*rec, cause)
}

// forgetClone removes rec, the record of a clone that failed, and gives
// its size back (forget; its quota is released by the caller); it returns
// cause.
func (tx *volumeTx) forgetClone(rec record, cause error) error {
	tx.rec = &rec
	if err := tx.forget(tx.enforcer(), 0); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}
