package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
	"sync"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/quota"
)

// Sizes. A volume made with a size (managerapi.CreateVolumeRequest.RequiredBytes)
// keeps it in its owner record, and its pool has promised it: a new volume,
// or the growth of one, must fit in what the pool has left, which is the
// smaller of the filesystem's free space and its capacity times the pool's
// overcommit ratio (Config.Overcommit, 1 by default) less what the pool has
// promised already. Where the pool's filesystem can enforce sizes (see the
// quota package: a btrfs subvolume per volume, or an XFS or ext4 project
// quota) the size is also the volume's limit, and the record keeps the
// quota ID so that deleting the volume frees it.
//
// What a pool has promised is summed from its owner records the first time
// a call needs it, then kept up to date by the calls that write or remove
// records; a pool's promise is loaded before its first record is removed
// so that the removal is never subtracted from a sum that did not count it.
// The sum belongs to the directory it was read from (its device and inode,
// rootID): a pool whose path now holds another directory, such as a
// filesystem mounted there (or unmounted, or replaced) since, is summed
// again from its own records, never charged with another's promises.

// sizes holds the Store's size accounting.
type sizes struct {
	// detect returns the enforcer of a pool root's filesystem.
	detect func(*os.Root) quota.Enforcer
	// overcommit maps pool names to their overcommit ratios.
	overcommit map[string]float64

	mu       sync.Mutex
	promises map[string]*promise
}

// rootID tells directories apart: their device and inode.
type rootID struct{ dev, ino uint64 }

// promise is what one pool has promised its volumes.
type promise struct {
	mu      sync.Mutex
	loaded  bool
	id      rootID // of the directory the sum was read from
	bytes   int64
	volumes int
}

// ratio returns the overcommit ratio of pool name.
func (z *sizes) ratio(name string) float64 {
	if r, ok := z.overcommit[name]; ok {
		return r
	}
	return 1
}

// promiseOf returns the promise of pool name, not necessarily loaded.
func (z *sizes) promiseOf(name string) *promise {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.promises == nil {
		z.promises = map[string]*promise{}
	}
	pr, ok := z.promises[name]
	if !ok {
		pr = &promise{}
		z.promises[name] = pr
	}
	return pr
}

// loadLocked sums the sizes in the owner records of the pool root, once
// per directory at the pool's path. The caller holds pr.mu.
func (pr *promise) loadLocked(p *pool, root *os.Root) error {
	id, err := rootIDOf(root)
	if err != nil {
		return fmt.Errorf("pool %q: %w", p.name, err)
	}
	if pr.loaded && pr.id == id {
		return nil
	}
	ok, err := checkMetaDirs(root)
	if err != nil {
		return fmt.Errorf("pool %q: %w", p.name, err)
	}
	var bytes int64
	var volumes int
	if ok {
		dir, err := root.Open(OwnersDir)
		if err != nil {
			return fmt.Errorf("open the owner records of pool %q: %w", p.name, err)
		}
		names, err := dir.Readdirnames(-1)
		dir.Close()
		if err != nil {
			return fmt.Errorf("read the owner records of pool %q: %w", p.name, err)
		}
		for _, n := range names {
			if ValidateVolumeName(n) != nil {
				continue // a temporary file
			}
			rec, err := p.record(root, n)
			if err != nil {
				return err
			}
			if rec != nil && rec.SizeBytes > 0 {
				bytes += rec.SizeBytes
				volumes++
			}
		}
	}
	pr.bytes, pr.volumes, pr.loaded, pr.id = bytes, volumes, true, id
	return nil
}

// load makes sure the promise of p is loaded.
func (z *sizes) load(p *pool, root *os.Root) error {
	pr := z.promiseOf(p.name)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.loadLocked(p, root)
}

// poolSizes are the figures of a pool that decide whether a size fits.
type poolSizes struct {
	stats     fsStats
	ratio     float64
	promised  int64
	volumes   int
	available int64
}

// availableBytes is the smaller of the free space and the capacity times
// ratio less what is promised, never negative.
func availableBytes(st fsStats, ratio float64, promised int64) int64 {
	budget := float64(st.CapacityBytes)*ratio - float64(promised)
	avail := st.FreeBytes
	if budget < float64(avail) {
		avail = int64(math.Max(budget, 0))
	}
	return max(avail, 0)
}

// withFigures runs fn with the promise of pool p locked and loaded, and
// the pool's figures read: what reserve and fill decide on.
func (z *sizes) withFigures(p *pool, root *os.Root, fn func(pr *promise, f poolSizes) error) error {
	pr := z.promiseOf(p.name)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err := pr.loadLocked(p, root); err != nil {
		return err
	}
	f, err := z.figuresLocked(p, root, pr)
	if err != nil {
		return err
	}
	return fn(pr, f)
}

// figuresLocked reads the pool's figures; the caller holds pr.mu and pr
// is loaded.
func (z *sizes) figuresLocked(p *pool, root *os.Root, pr *promise) (poolSizes, error) {
	st, err := statRoot(root)
	if err != nil {
		return poolSizes{}, fmt.Errorf("pool %q: %w", p.name, err)
	}
	r := z.ratio(p.name)
	return poolSizes{stats: st, ratio: r, promised: pr.bytes, volumes: pr.volumes, available: availableBytes(st, r, pr.bytes)}, nil
}

// reserve promises n more bytes of pool p (newVolume: to a new volume),
// or fails with InsufficientStorage naming the figures, as seen from node;
// request says what was asked for ("4Gi requested").
func (z *sizes) reserve(p *pool, root *os.Root, node string, n int64, newVolume bool, request string) error {
	if n <= 0 {
		return nil
	}
	return z.withFigures(p, root, func(pr *promise, f poolSizes) error {
		if n > f.available {
			return managerapi.Errorf(managerapi.ReasonInsufficientStorage,
				"pool %q on node %q has %s available, %s (free %s; capacity %s × overcommit ratio %g − %s promised to %s)",
				p.name, node, formatBytes(f.available), request, formatBytes(f.stats.FreeBytes), formatBytes(f.stats.CapacityBytes), f.ratio, formatBytes(f.promised), volumesText(f.volumes))
		}
		pr.bytes += n
		if newVolume {
			pr.volumes++
		}
		return nil
	})
}

// unreserve takes back n bytes promised by reserve (or by a record that is
// gone); oldVolume says that a volume went with them.
func (z *sizes) unreserve(p *pool, n int64, oldVolume bool) {
	if n <= 0 {
		return
	}
	pr := z.promiseOf(p.name)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.loaded {
		return
	}
	pr.bytes -= n
	if oldVolume {
		pr.volumes--
	}
}

// fill adds the size figures of pool p to info: its enforcement, what it
// has promised and what is available.
func (z *sizes) fill(info *managerapi.Pool, p *pool, root *os.Root) error {
	sup := z.detect(root).Support()
	info.Enforcement, info.EnforcementReason = sup.Kind, sup.Reason
	return z.withFigures(p, root, func(_ *promise, f poolSizes) error {
		info.PromisedBytes, info.OvercommitRatio, info.AvailableBytes = f.promised, f.ratio, f.available
		return nil
	})
}

// usage fills the used bytes and inodes of the volume name of p that rec
// describes, when its size is enforced by enf; a failure to read them is
// left out (the volume is still described).
func usage(v *managerapi.Volume, enf quota.Enforcer, root *os.Root, name string, rec *record) {
	if rec == nil || rec.Enforcement == "" || rec.Enforcement != enf.Support().Kind {
		return
	}
	u, err := enf.Usage(root, name, rec.QuotaID)
	if err != nil {
		return
	}
	if u.UsedBytes >= 0 {
		v.UsedBytes = &u.UsedBytes
	}
	if u.UsedInodes >= 0 {
		v.UsedInodes = &u.UsedInodes
	}
}

// quotaID returns the quota ID of the volume name that rec describes: the
// recorded one, else (a crash between making the volume and recording its
// ID) the one the enforcer finds on the directory, 0 when there is none.
func quotaID(enf quota.Enforcer, root *os.Root, name string, rec *record) uint64 {
	if rec.QuotaID != 0 || rec.Enforcement == "" || rec.Enforcement != enf.Support().Kind {
		return rec.QuotaID
	}
	id, err := enf.ID(root, name)
	if err != nil {
		return 0
	}
	return id
}

// removeEmpty removes the directory name of root if it is there (a
// subvolume can be removed like an empty directory).
func removeEmpty(root *os.Root, name string) error {
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// volumesText is "1 volume", "2 volumes".
func volumesText(n int) string {
	if n == 1 {
		return "1 volume"
	}
	return fmt.Sprintf("%d volumes", n)
}

// formatBytes writes n in binary units, as resource quantities do ("10Gi",
// "1.5Gi", "1.98Gi": at most two decimals), or in bytes below 1Ki.
func formatBytes(n int64) string {
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d", n)
	}
	v := float64(n)
	u := ""
	for _, next := range units {
		if math.Abs(v) < 1024 {
			break
		}
		v /= 1024
		u = next
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".") + u
}
