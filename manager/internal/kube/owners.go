package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// PVGetter gets PersistentVolumes: what Client's PersistentVolumes
// returns, or a clientset's CoreV1().PersistentVolumes().
type PVGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolume, error)
}

// ClaimGetter gets the PersistentVolumeClaims of one namespace: what
// Client's PersistentVolumeClaims returns, or a clientset's
// CoreV1().PersistentVolumeClaims(namespace).
type ClaimGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolumeClaim, error)
}

// Claims returns the ClaimGetter of a namespace.
type Claims func(namespace string) ClaimGetter

// ClassGetter gets StorageClasses: what Client's StorageClasses returns,
// or a clientset's StorageV1().StorageClasses().
type ClassGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.StorageClass, error)
}

// The defaults of OwnersOptions.
const (
	// DefaultBoundTTL is how long a PV found Bound is remembered.
	DefaultBoundTTL = 5 * time.Second
	// DefaultOwnerLookups is how many owner lookups may be in flight at
	// once.
	DefaultOwnerLookups = 8
	// DefaultOwnerCacheSize is how many Bound PVs are remembered.
	DefaultOwnerCacheSize = 1024
	// DefaultOwnerTimeout bounds one lookup.
	DefaultOwnerTimeout = 10 * time.Second
)

// OwnersOptions tune Owners; zero fields take the defaults.
type OwnersOptions struct {
	// BoundTTL is how long a PV found Bound, and not being deleted, is
	// remembered (DefaultBoundTTL).
	BoundTTL time.Duration
	// MaxInFlight bounds the GETs in flight at once; more wait for a
	// slot while their context lasts (DefaultOwnerLookups).
	MaxInFlight int
	// CacheSize bounds the PVs remembered; the least recently used are
	// forgotten first (DefaultOwnerCacheSize).
	CacheSize int
	// Timeout bounds one lookup, the wait for a slot included
	// (DefaultOwnerTimeout): the disk package asks under a volume's lock.
	Timeout time.Duration
	// Clock is for tests; nil means the real clock.
	Clock clock.PassiveClock
}

// Owners answers the disk package's questions about the PersistentVolumes
// that own its directories, the claims they are made for and the claims'
// classes (disk.Owners), from the API server: a PV is read fresh unless it
// was found Bound a few seconds ago (an answer that only ever refuses a
// caller bound to another node), a claim and a class are always read
// fresh. At most MaxInFlight lookups run at
// once, each within Timeout; the API client's QPS bounds them too. It is
// safe for concurrent use.
type Owners struct {
	pvs     PVGetter
	claims  Claims
	classes ClassGetter
	opts    OwnersOptions
	// bound remembers the PVs found Bound and not being deleted, by
	// name.
	bound *cache.LRUExpireCache // -> *corev1.PersistentVolume
	slots chan struct{}
}

// NewOwners returns the Owners that gets PVs with pvs, claims with claims
// and StorageClasses with classes (the manager's service account needs get
// on the three).
func NewOwners(pvs PVGetter, claims Claims, classes ClassGetter, opts OwnersOptions) *Owners {
	if opts.BoundTTL <= 0 {
		opts.BoundTTL = DefaultBoundTTL
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultOwnerLookups
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultOwnerCacheSize
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultOwnerTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Owners{
		pvs: pvs, claims: claims, classes: classes, opts: opts,
		bound: cache.NewLRUExpireCacheWithClock(opts.CacheSize, opts.Clock),
		slots: make(chan struct{}, opts.MaxInFlight),
	}
}

// PersistentVolume returns the PersistentVolume name, nil when it does
// not exist. Unless fresh, a PV found Bound and not being deleted less
// than BoundTTL ago may be answered from memory; any other answer (no
// PV, one being deleted, Released, Failed, Available, Pending) is read
// from the API server at every call, as it may allow what a Bound PV
// refuses. A fresh answer replaces the remembered one. The PV returned
// is shared: do not change it.
func (o *Owners) PersistentVolume(ctx context.Context, name string, fresh bool) (*corev1.PersistentVolume, error) {
	if !fresh {
		if v, ok := o.bound.Get(name); ok {
			return v.(*corev1.PersistentVolume), nil
		}
	}
	pv, err := lookupObject(ctx, o, fmt.Sprintf("PersistentVolume %q", name), func(ctx context.Context) (*corev1.PersistentVolume, error) {
		return o.pvs.Get(ctx, name, metav1.GetOptions{})
	})
	switch {
	case err != nil:
		return nil, err
	case pv != nil && pv.Status.Phase == corev1.VolumeBound && pv.DeletionTimestamp == nil:
		o.bound.Add(name, pv, o.opts.BoundTTL)
	default:
		o.bound.Remove(name)
	}
	return pv, nil
}

// Claim returns the PersistentVolumeClaim name of namespace, read from
// the API server, nil when it does not exist.
func (o *Owners) Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return lookupObject(ctx, o, fmt.Sprintf("PersistentVolumeClaim %s/%s", namespace, name), func(ctx context.Context) (*corev1.PersistentVolumeClaim, error) {
		return o.claims(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}

// StorageClass returns the StorageClass name, read from the API server,
// nil when it does not exist.
func (o *Owners) StorageClass(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	return lookupObject(ctx, o, fmt.Sprintf("StorageClass %q", name), func(ctx context.Context) (*storagev1.StorageClass, error) {
		return o.classes.Get(ctx, name, metav1.GetOptions{})
	})
}

// lookupObject gets one object (what names it in errors) with get in one
// of o's slots: nil, nil when the API server says NotFound.
func lookupObject[T any](ctx context.Context, o *Owners, what string, get func(context.Context) (*T, error)) (*T, error) {
	var obj *T
	err := o.lookup(ctx, func(ctx context.Context) (err error) {
		obj, err = get(ctx)
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get %s: %w", what, err)
	}
	return obj, nil
}

// lookup runs get in a slot, within Timeout.
func (o *Owners) lookup(ctx context.Context, get func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, o.opts.Timeout)
	defer cancel()
	select {
	case o.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait for one of the %d owner lookups in flight: %w", cap(o.slots), ctx.Err())
	}
	defer func() { <-o.slots }()
	return get(ctx)
}
