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
		return managerapi.Errorf(managerapi.ReasonConflict, "volume %q in pool %q is being cloned (as the source or the target of a clone); try again when the clone is done", name, p.name)
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
// record: one of the same owner must say what req asks (checkSameRecord,
// else Conflict). A remote caller must name the claim (req.ClaimNamespace
// and req.ClaimName, else BadRequest before anything is read), which the
// API server must know as the owner's, of a multihost class
// (checkRemoteClaim, Conflict otherwise), before a copy starts, that is
// before a record is written; the calls that follow a copy, or find it
// made, change nothing and ask the API server nothing. See the comment on
// stagingPrefix for what a restart leaves.
func (s *Store) CloneVolume(ctx context.Context, poolName, name string, req managerapi.CloneVolumeRequest, mode fs.FileMode, remote string) (*managerapi.Clone, bool, error) {
	p, err := s.checkCreate(poolName, name, req.CreateVolumeRequest, mode, remote)
	if err != nil {
		return nil, false, err
	}
	target := claimOfCreate(req.CreateVolumeRequest)
	if err := s.requireClaim(remote, "clone into", p, name, target); err != nil {
		return nil, false, err
	}
	sp, err := s.ownedVolumePool(req.SourcePool, req.SourceName, req.SourceOwner)
	if err != nil {
		return nil, false, err
	}
	if cl, created, err, done := s.cloneState(p, name, req, remote); done {
		return cl, created, err
	}
	// A copy has to start: checked outside the start lock, as the API
	// server may take a while, and before anything is written.
	if err := s.checkRemoteClaim(ctx, remote, "clone into", p, name, target); err != nil {
		return nil, false, err
	}
	s.clones.start.Lock()
	defer s.clones.start.Unlock()
	// Checked again under start: another call may have started it.
	if cl, created, err, done := s.cloneState(p, name, req, remote); done {
		return cl, created, err
	}
	srcMultihost, err := s.holdSource(sp, req, remote)
	if err != nil {
		return nil, false, err
	}
	if remote != "" && !srcMultihost {
		s.release(sp.key(req.SourceName))
		return nil, false, forbiddenf("a caller bound to node %q may clone on node %q only multihost volumes: volume %q in pool %q is of node mode", remote, s.nodeName, req.SourceName, sp.name)
	}
	j, err := s.startClone(ctx, p, sp, name, req, mode)
	if err != nil {
		s.release(sp.key(req.SourceName))
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
// volume in place, must say what req asks (checkSameRecord: Conflict,
// nothing changed), as for a create.
func (s *Store) cloneState(p *pool, name string, req managerapi.CloneVolumeRequest, remote string) (cl *managerapi.Clone, created bool, err error, done bool) {
	root, release, err := s.openLocked(p, name)
	if err != nil {
		return nil, false, err, true
	}
	defer release()
	key := p.key(name)
	// What the job was when looked at, once: it may end meanwhile, and
	// is then answered by the next call.
	var running bool
	var jobErr error
	s.clones.mu.Lock()
	j := s.clones.jobs[key]
	if j != nil && j.ended {
		delete(s.clones.jobs, key)
	}
	if j != nil {
		running, jobErr = !j.ended, j.err
	}
	s.clones.mu.Unlock()
	switch {
	case j != nil && j.owner != req.Owner:
		return nil, false, ownerConflictf(j.owner, "volume %q in pool %q is being cloned for PersistentVolume %q", name, p.name, j.owner), true
	case j != nil && !running && jobErr != nil:
		return nil, false, jobErr, true
	}
	fi, exists, err := p.lstat(root, name)
	if err != nil {
		return nil, false, err, true
	}
	rec, err := p.record(root, name)
	if err != nil {
		return nil, false, err, true
	}
	if err := s.checkRemote(remote, "create", p, name, rec); err != nil {
		return nil, false, err, true
	}
	switch {
	case rec != nil && rec.Owner != req.Owner:
		return nil, false, ownerConflictf(rec.Owner, "directory %q in pool %q belongs to PersistentVolume %q", name, p.name, rec.Owner), true
	case rec == nil && exists:
		return nil, false, ownerConflictf("", "directory %q in pool %q exists without an owner record; it must be adopted with PUT /v1/pools/%s/volumes/%s/owner", name, p.name, p.name, name), true
	case rec != nil:
		if err := p.checkSameRecord(name, rec, req.CreateVolumeRequest); err != nil {
			return nil, false, err, true
		}
	}
	switch {
	case running:
		// The copy is in its staging directory: the volume is not.
		return s.clones.status(j), false, nil, true
	case !exists:
		return nil, false, nil, false
	}
	v := p.volume(name, fi, rec)
	usage(&v, s.sizes.detect(root), root, name, rec)
	cl = &managerapi.Clone{Source: req.SourcePool + "/" + req.SourceName, State: managerapi.CloneDone, Method: rec.CloneMethod, Seconds: rec.CloneSeconds, Volume: &v}
	if j != nil {
		cl = s.clones.status(j)
		cl.Volume = &v
	}
	return cl, j != nil, nil, true
}

// holdSource checks, under its lock, that the source volume exists, is a
// directory and belongs to req.SourceOwner, and that its claim namespace
// (when recorded) is req's; then marks it busy, so that it is not deleted
// while it is copied. It reports whether the source is multihost.
func (s *Store) holdSource(sp *pool, req managerapi.CloneVolumeRequest, remote string) (bool, error) {
	root, release, err := s.openLocked(sp, req.SourceName)
	if err != nil {
		return false, err
	}
	defer release()
	fi, exists, err := sp.lstat(root, req.SourceName)
	if err != nil {
		return false, err
	}
	rec, err := sp.record(root, req.SourceName)
	if err != nil {
		return false, err
	}
	switch {
	case !exists || rec == nil:
		return false, managerapi.Errorf(managerapi.ReasonNotFound, "source volume %q does not exist in pool %q on node %q", req.SourceName, sp.name, s.nodeName)
	case !fi.IsDir():
		return false, managerapi.Errorf(managerapi.ReasonConflict, "source %q in pool %q is %s, not a volume directory", req.SourceName, sp.name, kindOf(fi))
	case rec.Owner != req.SourceOwner:
		return false, ownerConflictf(rec.Owner, "source volume %q in pool %q belongs to PersistentVolume %q, not %q", req.SourceName, sp.name, rec.Owner, req.SourceOwner)
	case rec.Retained:
		return false, managerapi.Errorf(managerapi.ReasonConflict, "source volume %q in pool %q is retained: its PersistentVolume %q was deleted", req.SourceName, sp.name, rec.Owner)
	case rec.ClaimNamespace != "" && rec.ClaimNamespace != req.ClaimNamespace:
		return false, forbiddenf("source volume %q in pool %q belongs to a claim of namespace %q; a clone for namespace %q may not copy it", req.SourceName, sp.name, rec.ClaimNamespace, req.ClaimNamespace)
	case req.RequiredBytes < rec.SizeBytes:
		return false, managerapi.Errorf(managerapi.ReasonConflict, "the clone asks for %s, less than the %s of source volume %q in pool %q", formatBytes(req.RequiredBytes), formatBytes(rec.SizeBytes), req.SourceName, sp.name)
	}
	s.hold(sp.key(req.SourceName))
	return rec.Multihost, nil
}

// hold and release count a running clone's use of a volume key.
func (s *Store) hold(key string) {
	s.clones.mu.Lock()
	defer s.clones.mu.Unlock()
	s.clones.busy[key]++
}

func (s *Store) release(key string) {
	s.clones.mu.Lock()
	defer s.clones.mu.Unlock()
	s.releaseLocked(key)
}

// releaseLocked is release with s.clones.mu held.
func (s *Store) releaseLocked(key string) {
	if s.clones.busy[key]--; s.clones.busy[key] <= 0 {
		delete(s.clones.busy, key)
	}
}

// startClone, under the target's lock, writes the new volume's owner
// record (reserving its size), unless one of the same owner is there (a
// clone that a restart interrupted: its quota is released, as its staging
// directory is gone or going), removes the pool's leftover staging
// directories once per process, and starts the copy.
func (s *Store) startClone(ctx context.Context, p, sp *pool, name string, req managerapi.CloneVolumeRequest, mode fs.FileMode) (*cloneJob, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pool", p.name, "volume", name, "owner", req.Owner, "source", sp.name+"/"+req.SourceName)
	root, release, err := s.openLocked(p, name)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, exists, err := p.lstat(root, name); err != nil || exists {
		if err == nil {
			err = managerapi.Errorf(managerapi.ReasonConflict, "volume %q in pool %q was made while its clone was starting", name, p.name)
		}
		return nil, err
	}
	if err := s.sweepStaging(ctx, root, p); err != nil {
		return nil, err
	}
	rec, err := p.record(root, name)
	if err != nil {
		return nil, err
	}
	enf := s.sizes.detect(root)
	source := sp.name + "/" + req.SourceName
	if rec == nil {
		newRec := record{Owner: req.Owner, ReclaimPolicy: req.ReclaimPolicy, ClaimNamespace: req.ClaimNamespace, SizeBytes: req.RequiredBytes, Multihost: req.Multihost, CloneOf: source}
		if rec, _, err = s.ownNew(logger, root, p, name, newRec, req.EnforceSize, enf.Support()); err != nil {
			return nil, err
		}
	} else if rec.QuotaID != 0 && rec.Enforcement == enf.Support().Kind {
		if err := enf.Release(root, rec.QuotaID); err != nil {
			return nil, fmt.Errorf("release the quota %d of the interrupted clone %q in pool %q: %w", rec.QuotaID, name, p.name, err)
		}
		next := *rec
		next.QuotaID = 0
		if err := writeRecord(root, name, next); err != nil {
			return nil, fmt.Errorf("volume %q in pool %q: %w", name, p.name, err)
		}
		rec = &next
	}
	j := &cloneJob{owner: req.Owner, source: source, state: managerapi.CloneQueued}
	key := p.key(name)
	s.clones.mu.Lock()
	s.clones.jobs[key] = j
	s.clones.busy[key]++
	s.clones.mu.Unlock()
	go s.runClone(klog.NewContext(context.WithoutCancel(ctx), logger), j, p, sp, name, req, *rec, mode)
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
func (s *Store) runClone(ctx context.Context, j *cloneJob, p, sp *pool, name string, req managerapi.CloneVolumeRequest, rec record, mode fs.FileMode) {
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
	err := s.copyClone(ctx, j, p, sp, name, req, rec, mode)
	s.clones.mu.Lock()
	s.releaseLocked(p.key(name))
	s.releaseLocked(sp.key(req.SourceName))
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
func (s *Store) copyClone(ctx context.Context, j *cloneJob, p, sp *pool, name string, req managerapi.CloneVolumeRequest, rec record, mode fs.FileMode) error {
	root, err := p.open()
	if err != nil {
		return err
	}
	defer root.Close()
	staging := stagingName(name)
	enf := s.sizes.detect(root)
	method, id, err := s.fillStaging(ctx, j, root, enf, p, sp, staging, req, rec)
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
		return s.dropClone(p, name, req.Owner, err)
	}
	s.clones.mu.Lock()
	j.method = method
	seconds := s.clock.Since(j.started).Seconds()
	s.clones.mu.Unlock()
	unlock := s.lock(p.key(name))
	defer unlock()
	rec.QuotaID, rec.CloneMethod, rec.CloneSeconds = id, method, seconds
	if err := s.placeClone(root, p, name, staging, rec, mode); err != nil {
		undo()
		return s.forgetClone(root, p, name, rec, err)
	}
	return nil
}

// fillStaging makes the staging directory with the pool's quota and the
// source's content: a btrfs snapshot of a source subvolume of the same
// pool where the pool's enforcer makes them, else a new directory filled
// by clone.Contents (reflink, else copy). It returns the method and the
// staging directory's quota ID (0: none).
func (s *Store) fillStaging(ctx context.Context, j *cloneJob, root *os.Root, enf quota.Enforcer, p, sp *pool, staging string, req managerapi.CloneVolumeRequest, rec record) (string, uint64, error) {
	enforced := rec.Enforcement != "" && rec.Enforcement == enf.Support().Kind
	if snap, ok := enf.(quota.Snapshotter); ok && enforced && sp.name == p.name {
		id, err := snap.Snapshot(root, req.SourceName, staging, rec.SizeBytes)
		switch {
		case err == nil:
			return managerapi.CloneMethodSnapshot, id, nil
		case !errors.Is(err, quota.ErrNotSubvolume):
			return "", 0, fmt.Errorf("snapshot volume %q of pool %q: %w", req.SourceName, p.name, err)
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
	method, err := s.copyContents(ctx, j, root, sp, req.SourceName, staging)
	return method, id, err
}

// copyContents copies the source volume's content into the staging
// directory with clone.Contents, counting its progress in j.
func (s *Store) copyContents(ctx context.Context, j *cloneJob, root *os.Root, sp *pool, source, staging string) (string, error) {
	sroot, err := sp.open()
	if err != nil {
		return "", err
	}
	defer sroot.Close()
	src, err := sroot.OpenRoot(source)
	if err != nil {
		return "", fmt.Errorf("open source volume %q in pool %q: %w", source, sp.name, err)
	}
	defer src.Close()
	dst, err := root.OpenRoot(staging)
	if err != nil {
		return "", fmt.Errorf("open the staging directory of the clone: %w", err)
	}
	defer dst.Close()
	total, err := clone.Size(ctx, src, s.clones.limits)
	if err != nil {
		return "", cloneError(sp, source, fmt.Errorf("size source volume %q in pool %q: %w", source, sp.name, err))
	}
	j.total.Store(total)
	method, err := clone.Contents(ctx, src, dst, clone.Options{Progress: func(pr clone.Progress) { j.copied.Store(pr.CopiedBytes) }, TotalBytes: total, Limits: s.clones.limits})
	if err != nil {
		return "", cloneError(sp, source, fmt.Errorf("copy source volume %q of pool %q: %w", source, sp.name, err))
	}
	return string(method), nil
}

// cloneError makes the error of a copy beyond clone's limits (a source
// tree too deep, of too many entries or hard links) a Conflict that says
// which limit and where: a refusal that the claim's events show and that
// retrying does not change, not an internal error. Other errors are
// returned as they are.
func cloneError(sp *pool, source string, err error) error {
	var le *clone.LimitError
	if !errors.As(err, &le) {
		return err
	}
	return managerapi.Errorf(managerapi.ReasonConflict, "source volume %q of pool %q cannot be cloned by copy: %v at %q: %s; see \"Limits\" in docs/clones.md",
		source, sp.name, le.Which, le.Path, le.Detail)
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
func (s *Store) placeClone(root *os.Root, p *pool, name, staging string, rec record, mode fs.FileMode) error {
	rec.OwnedSince = s.now()
	if err := writeRecord(root, name, rec); err != nil {
		return fmt.Errorf("record the clone of volume %q in pool %q: %w", name, p.name, err)
	}
	if err := root.Rename(staging, name); err != nil {
		return fmt.Errorf("put the clone of volume %q in pool %q in place: %w", name, p.name, err)
	}
	fi, err := s.labelVolume(root, p, name)
	if err == nil {
		_, err = p.setMode(root, name, fi, mode)
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

// dropClone, after a failed copy, removes the clone's owner record under
// the target's lock and gives back its size; it returns cause.
func (s *Store) dropClone(p *pool, name, owner string, cause error) error {
	unlock := s.lock(p.key(name))
	defer unlock()
	root, err := p.open()
	if err != nil {
		return errors.Join(cause, err)
	}
	defer root.Close()
	rec, err := p.record(root, name)
	if err != nil || rec == nil || rec.Owner != owner {
		return errors.Join(cause, err)
	}
	return s.forgetClone(root, p, name, *rec, cause)
}

// forgetClone removes the record of a clone that failed and gives its size
// back (forget; its quota is released by the caller); it returns cause.
func (s *Store) forgetClone(root *os.Root, p *pool, name string, rec record, cause error) error {
	if err := s.forget(root, p, name, &rec, s.sizes.detect(root), 0); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}
