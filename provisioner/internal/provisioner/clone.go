package provisioner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/util"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// Clones. A claim whose dataSource (or dataSourceRef) names a claim of the
// same namespace and StorageClass is a clone: its volume is made by the
// manager of the source's node as a copy of the source's directory (a
// multihost source: by every ready node's manager, each copying its own
// directory). A node-mode clone goes to the source's node whatever its
// annotations say, as provision-on-node pins a claim: the instance of that
// node sets selected-node on it, so the scheduler places its pods there.
// The manager copies in the background; Provision follows the copy, with
// events on the claim, for up to Config.CloneWait, then lets the library
// call again.

// Reasons of the clone events on claims.
const (
	// ReasonCloneStarted (Normal): the manager started copying the source.
	ReasonCloneStarted = "CloneStarted"
	// ReasonCloneProgress (Normal): how far a long copy is, every
	// cloneProgressStep of it or every cloneProgressEvery.
	ReasonCloneProgress = "CloneProgress"
	// ReasonCloneFinished (Normal): the copy is whole, with its method and
	// the time it took.
	ReasonCloneFinished = "CloneFinished"
	// ReasonCloneSourceInvalid (Warning): the claim's data source cannot
	// be cloned (another kind, namespace or class, missing, smaller than
	// the source, not a hostpath volume).
	ReasonCloneSourceInvalid = "CloneSourceInvalid"
	// ReasonCloneSourcePending (Normal): the source claim is not Bound yet;
	// the clone waits for it.
	ReasonCloneSourcePending = "CloneSourcePending"
)

// DefaultCloneWait is how long one Provision call follows a copy before
// it lets the library call again (the copy goes on meanwhile).
const DefaultCloneWait = 5 * time.Minute

// DefaultClonePoll is how often a copy is asked how far it is.
const DefaultClonePoll = time.Second

// When a copy's progress is reported on the claim.
const (
	cloneProgressStep  = 10 // percent
	cloneProgressEvery = time.Minute
)

// source is the volume a clone claim copies.
type source struct {
	// claim and pv are the source claim and its PersistentVolume.
	claim *v1.PersistentVolumeClaim
	pv    *v1.PersistentVolume
	// dir locates the source's directory.
	dir hostpathv1.VolumeDirectory
}

// sourceError is why a claim's data source cannot be cloned; pending
// says that it may become clonable (the source claim is not Bound yet).
type sourceError struct {
	msg     string
	pending bool
}

func (e *sourceError) Error() string { return e.msg }

func invalidSource(format string, args ...any) error {
	return &sourceError{msg: fmt.Sprintf(format, args...)}
}

// sourceClaimName returns the name of the claim that claim's data source
// names, "" when it has no data source, or why the data source is not
// one hostpath can clone.
func sourceClaimName(claim *v1.PersistentVolumeClaim) (string, error) {
	var group, kind, name string
	var namespace *string
	switch ref, ds := claim.Spec.DataSourceRef, claim.Spec.DataSource; {
	case ref != nil:
		group, kind, name, namespace = ptr.Deref(ref.APIGroup, ""), ref.Kind, ref.Name, ref.Namespace
	case ds != nil:
		group, kind, name = ptr.Deref(ds.APIGroup, ""), ds.Kind, ds.Name
	default:
		return "", nil
	}
	switch {
	case group != "" || kind != "PersistentVolumeClaim":
		return "", invalidSource("the data source is a %s: hostpath makes a volume only from a PersistentVolumeClaim (a clone), not from a volume snapshot or a populator", groupKind(group, kind))
	case namespace != nil && *namespace != "" && *namespace != claim.Namespace:
		return "", invalidSource("the source claim %s/%s is in another namespace: a clone's source must be a claim of the clone's own namespace %q", *namespace, name, claim.Namespace)
	}
	return name, nil
}

// cloneSource resolves the data source of claim, of StorageClass class,
// from the caches: nil when the claim is no clone, else the source, or
// a *sourceError. A source claim or PV that is not in the cache is looked
// up on the API server: the informers cache neither another provisioner's
// claims (such a source gets the error of its class) nor the claims and
// PVs settled on another node (package cachetrim).
func (p *Provisioner) cloneSource(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass) (*source, error) {
	name, err := sourceClaimName(claim)
	if name == "" || err != nil {
		return nil, err
	}
	what := fmt.Sprintf("source claim %s/%s", claim.Namespace, name)
	src, err := p.cfg.Claims.PersistentVolumeClaims(claim.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		src, err = p.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, invalidSource("%s does not exist (a clone's source must be a claim of the clone's own namespace)", what)
	case err != nil:
		return nil, fmt.Errorf("get %s: %w", what, err)
	case util.GetPersistentVolumeClaimClass(src) != class.Name:
		return nil, invalidSource("%s is of StorageClass %q, the clone of %q: a clone must be of its source's StorageClass", what, util.GetPersistentVolumeClaimClass(src), class.Name)
	case src.Spec.VolumeName == "" || src.Status.Phase != v1.ClaimBound:
		return nil, &sourceError{msg: what + " is not Bound yet: the clone is made once it is", pending: true}
	}
	pv, err := p.cfg.Volumes.Get(src.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		// Not cached: a Bound PV of another node (package cachetrim).
		pv, err = p.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, src.Spec.VolumeName, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, &sourceError{msg: fmt.Sprintf("the PersistentVolume %q of %s does not exist yet", src.Spec.VolumeName, what), pending: true}
	case err != nil:
		return nil, fmt.Errorf("get PersistentVolume %q: %w", src.Spec.VolumeName, err)
	}
	dir, ok := hostpathv1.VolumeDirectoryOf(pv, p.cfg.Names)
	if !ok || dir.Directory == "" || (!dir.Multihost && dir.Node == "") {
		return nil, invalidSource("the PersistentVolume %q of %s is not a hostpath volume", pv.Name, what)
	}
	want, have := claim.Spec.Resources.Requests[v1.ResourceStorage], pv.Spec.Capacity[v1.ResourceStorage]
	if want.Cmp(have) < 0 {
		return nil, invalidSource("the clone requests %s, less than the %s of %s: request at least as much", want.String(), have.String(), what)
	}
	return &source{claim: src, pv: pv, dir: dir}, nil
}

// cloneRequest is what a manager is asked for a clone of src as pv. It
// names the clone's claim (pv's hostpathv1.AnnotationClaimName, which
// buildPV sets from the claim), as a multihost create does: the manager of
// another node than this instance's (a multihost clone is copied on every
// node) starts a copy only for a claim it can check, by name, at the API
// server; this node's manager does not need it.
func cloneRequest(pv *v1.PersistentVolume, src *source, dirMode string, enforceSize bool) managerapi.CloneVolumeRequest {
	req := managerapi.CloneVolumeRequest{
		CreateVolumeRequest: hostpathv1.NewCreateVolumeRequest(pv, dirMode, enforceSize),
		SourcePool:          src.dir.Pool,
		SourceName:          src.dir.Directory,
		SourceOwner:         src.pv.Name,
	}
	req.ClaimName = pv.Annotations[hostpathv1.AnnotationClaimName]
	return req
}

// cloneFollower follows the copies of one clone (one per node) with
// events on its claim: CloneStarted once, CloneProgress every
// cloneProgressStep percent or cloneProgressEvery, CloneFinished when all
// are done.
type cloneFollower struct {
	recorder record.EventRecorder
	clock    clock.PassiveClock
	claim    *v1.PersistentVolumeClaim
	source   string
	started  time.Time

	mu       sync.Mutex
	copies   map[string]*managerapi.Clone
	reported bool
	lastPct  int64
	lastTime time.Time
}

func (p *Provisioner) newCloneFollower(claim *v1.PersistentVolumeClaim, src *source) *cloneFollower {
	clk := p.clock()
	return &cloneFollower{recorder: p.cfg.Recorder, clock: clk, claim: claim, started: clk.Now(),
		source: fmt.Sprintf("claim %s (volume %s)", src.claim.Name, src.pv.Name), copies: map[string]*managerapi.Clone{}}
}

// event records an event on the claim, if there is a recorder.
func (f *cloneFollower) event(reason, format string, args ...any) {
	if f.recorder != nil {
		f.recorder.Eventf(f.claim, v1.EventTypeNormal, reason, format, args...)
	}
}

// seen takes in the answer about node's copy, and reports.
func (f *cloneFollower) seen(node string, cl *managerapi.Clone) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.copies[node] = cl
	if !f.reported {
		f.reported = true
		f.lastTime = f.clock.Now()
		f.event(ReasonCloneStarted, "Cloning %s on %s", f.source, nodesText(f.copies))
	}
	var copied, total int64
	for _, c := range f.copies {
		copied, total = copied+c.CopiedBytes, total+c.TotalBytes
	}
	if total <= 0 {
		return
	}
	pct := copied * 100 / total
	now := f.clock.Now()
	if pct >= f.lastPct+cloneProgressStep && pct < 100 || now.Sub(f.lastTime) >= cloneProgressEvery {
		f.lastPct, f.lastTime = pct, now
		f.event(ReasonCloneProgress, "Cloning %s: %d%% (%s of %s)", f.source, pct, mebibytes(copied), mebibytes(total))
	}
}

// finished reports CloneFinished: the method of each copy and the time.
func (f *cloneFollower) finished() {
	f.mu.Lock()
	defer f.mu.Unlock()
	methods := map[string]bool{}
	var bytes int64
	var seconds float64
	for _, c := range f.copies {
		methods[c.Method] = true
		bytes += c.TotalBytes
		seconds = max(seconds, c.Seconds)
	}
	method := ""
	for m := range methods {
		if method != "" {
			method += "+"
		}
		method += m
	}
	f.event(ReasonCloneFinished, "Cloned %s by %s in %.3fs on %s (%s of files), %.1fs after this instance started following it",
		f.source, method, seconds, nodesText(f.copies), mebibytes(bytes), f.clock.Since(f.started).Seconds())
}

// nodesText names the nodes of copies, for events.
func nodesText(copies map[string]*managerapi.Clone) string {
	if len(copies) == 1 {
		for node := range copies {
			return "node " + node
		}
	}
	return fmt.Sprintf("%d nodes", len(copies))
}

// follow asks mgr for the clone into dir of pool until it is done, for up
// to Config.CloneWait, telling f; it returns the volume, or the state and
// error to hand the library.
func (p *Provisioner) follow(ctx context.Context, f *cloneFollower, node string, mgr VolumeManager, pool, dir string, req managerapi.CloneVolumeRequest) (*managerapi.Volume, error) {
	limit, every := p.cfg.CloneWait, p.cfg.ClonePoll
	if limit <= 0 {
		limit = DefaultCloneWait
	}
	if every <= 0 {
		every = DefaultClonePoll
	}
	var vol *managerapi.Volume
	err := waitFor(ctx, every, limit, func(ctx context.Context) (bool, error) {
		cl, err := mgr.CloneVolume(ctx, pool, dir, req)
		if err != nil {
			return false, err
		}
		f.seen(node, cl)
		vol = cl.Volume
		return vol != nil, nil
	})
	if err != nil {
		return nil, err
	}
	return vol, nil
}

// errCloneRunning says that a copy goes on after a Provision call stopped
// following it.
var errCloneRunning = errors.New("the clone is still being copied; will follow it again")

// waitFor polls done every interval for up to limit; a limit reached is
// errCloneRunning.
func waitFor(ctx context.Context, every, limit time.Duration, done wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, every, limit, true, done)
	if err != nil && wait.Interrupted(err) && ctx.Err() == nil {
		return errCloneRunning
	}
	return err
}

// cloneState maps a clone's error to the library's state: a copy still
// running, or an answer that is no refusal, is retried in the background.
func cloneState(err error) controller.ProvisioningState {
	var se *sourceError
	switch {
	case errors.Is(err, errCloneRunning):
		return controller.ProvisioningInBackground
	case errors.As(err, &se):
		if se.pending {
			return controller.ProvisioningInBackground
		}
		return controller.ProvisioningFinished
	}
	return controller.ProvisioningInBackground
}

// reportSource emits the event of a data source that cannot be cloned.
func reportSource(recorder record.EventRecorder, claim *v1.PersistentVolumeClaim, err error) {
	var se *sourceError
	if recorder == nil || !errors.As(err, &se) {
		return
	}
	if se.pending {
		recorder.Event(claim, v1.EventTypeNormal, ReasonCloneSourcePending, se.msg)
		return
	}
	recorder.Event(claim, v1.EventTypeWarning, ReasonCloneSourceInvalid, se.msg)
}

// mebibytes writes n bytes in MiB, for events.
func mebibytes(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}
