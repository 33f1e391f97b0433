package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// usageTimeout bounds one refresh's reading of the pools.
const usageTimeout = 10 * time.Second

// DefaultUsageInterval is the default Config.UsageInterval: how often the
// usage figures /metrics exports are read from the Backend.
const DefaultUsageInterval = 30 * time.Second

// usageCollector exports the size figures of every pool and of every volume
// with a size, as the last refresh read them from the Backend. A refresh
// (run every interval by a single goroutine, see run) costs a listing of
// each pool and, for volumes whose size is enforced, a read of their quota;
// a scrape costs no disk work at all: Collect only sends the figures of
// the last completed refresh. Before the first refresh completes, Collect
// sends no usage metric at all, the refresh ones included.
//
// Cardinality: the pool series have one label, pool, and the volume series
// two, pool and volume (the directory name), one series per volume with a
// size on this node: bounded by the volumes the node holds, and gone with
// the volume (at the next refresh). The two refresh series,
// hostpath_manager_usage_refresh_timestamp_seconds and
// hostpath_manager_usage_refresh_duration_seconds, have no label: one
// series each.
type usageCollector struct {
	backend Backend
	// clock times the refreshes.
	clock clock.PassiveClock
	// snapshot is the last completed refresh's figures; nil until the
	// first completes.
	snapshot atomic.Pointer[usageSnapshot]
	// running is set by run, so that a single loop refreshes.
	running atomic.Bool

	poolCapacity, poolPromised, poolAvailable *prometheus.Desc
	volumeSize, volumeUsed, volumeInodes      *prometheus.Desc
	refreshTimestamp, refreshDuration         *prometheus.Desc
}

var _ prometheus.Collector = &usageCollector{}

// usageSnapshot is what one refresh read: the figures of the pools that
// could be read and of their volumes, and when and how fast it was read.
// It is never changed once published.
type usageSnapshot struct {
	// pools are the pools read, with their volumes.
	pools []poolUsage
	// completed is when the refresh completed, took how long it took.
	completed time.Time
	took      time.Duration
}

// poolUsage is the size figures of one pool and of its volumes.
type poolUsage struct {
	name                          string
	capacity, promised, available int64
	volumes                       []volumeUsage
}

// volumeUsage is the size figures of one volume: size 0 when made without
// one, used and inodes nil when its quota does not count them.
type volumeUsage struct {
	name         string
	size         int64
	used, inodes *int64
}

// newUsageCollector returns the usage collector of b; it sends nothing of
// the usage until its first refresh (run, or refresh) completes.
func newUsageCollector(b Backend) *usageCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("hostpath_manager", "", name), help, labels, nil)
	}
	return &usageCollector{
		backend:          b,
		clock:            clock.RealClock{},
		poolCapacity:     d("pool_capacity_bytes", "Size of the filesystem holding the pool.", "pool"),
		poolPromised:     d("pool_promised_bytes", "Sum of the sizes of the pool's volumes.", "pool"),
		poolAvailable:    d("pool_available_bytes", "Largest size a new volume of the pool can have now (free space, capacity × overcommit ratio − promised).", "pool"),
		volumeSize:       d("volume_size_bytes", "Size of the volume (its limit where the pool enforces sizes), for volumes made with a size.", "pool", "volume"),
		volumeUsed:       d("volume_used_bytes", "Bytes the volume uses, as its quota counts them (volumes whose size is enforced).", "pool", "volume"),
		volumeInodes:     d("volume_used_inodes", "Inodes the volume uses, as its quota counts them (project quotas; btrfs counts none).", "pool", "volume"),
		refreshTimestamp: d("usage_refresh_timestamp_seconds", "Unix time at which the pool and volume figures exported were read (the last completed refresh)."),
		refreshDuration:  d("usage_refresh_duration_seconds", "Time the last completed refresh of the pool and volume figures took."),
	}
}

// Describe sends the descriptors of the usage metrics.
func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.poolCapacity, c.poolPromised, c.poolAvailable, c.volumeSize, c.volumeUsed, c.volumeInodes, c.refreshTimestamp, c.refreshDuration} {
		ch <- d
	}
}

// Collect sends the figures of the last completed refresh, and when it
// completed and how long it took; nothing before the first refresh
// completes. It never calls the Backend.
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot.Load()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.refreshTimestamp, float64(s.completed.UnixNano())/1e9)
	gauge(c.refreshDuration, s.took.Seconds())
	for _, p := range s.pools {
		gauge(c.poolCapacity, float64(p.capacity), p.name)
		gauge(c.poolPromised, float64(p.promised), p.name)
		gauge(c.poolAvailable, float64(p.available), p.name)
		for _, v := range p.volumes {
			if v.size > 0 {
				gauge(c.volumeSize, float64(v.size), p.name, v.name)
			}
			if v.used != nil {
				gauge(c.volumeUsed, float64(*v.used), p.name, v.name)
			}
			if v.inodes != nil {
				gauge(c.volumeInodes, float64(*v.inodes), p.name, v.name)
			}
		}
	}
}

// RunUsageRefresher refreshes the pool and volume figures that /metrics
// exports every Config.UsageInterval, the first time at once, until ctx
// ends; it logs with ctx's logger. Scrapes only send the figures of the
// last completed refresh: none before the first completes, and none at
// all when RunUsageRefresher is never called. Call it once, for the
// server's lifetime (a second call while one runs logs an error and
// returns at once).
func (s *Server) RunUsageRefresher(ctx context.Context) {
	s.usage.run(ctx, s.cfg.UsageInterval)
}

// run refreshes the figures every interval, the first time at once, until
// ctx ends (wait.UntilWithContext: the interval runs from the end of one
// refresh to the start of the next). A failed refresh is logged, unless
// ctx ended. Only one run refreshes: a second call while one runs logs an
// error and returns at once.
func (c *usageCollector) run(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx)
	if !c.running.CompareAndSwap(false, true) {
		logger.Error(nil, "The usage metrics are already being refreshed; not starting a second refresher")
		return
	}
	defer c.running.Store(false)
	logger.V(2).Info("Refreshing the usage metrics", "interval", interval)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.refresh(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Cannot refresh the usage metrics; /metrics keeps serving the previous figures", "previousRefresh", c.lastRefresh())
		}
	}, interval)
}

// lastRefresh is when the last completed refresh completed; zero before
// the first.
func (c *usageCollector) lastRefresh() time.Time {
	if s := c.snapshot.Load(); s != nil {
		return s.completed
	}
	return time.Time{}
}

// refresh reads the pools and their volumes, within usageTimeout, and
// publishes their figures for Collect. A pool that cannot be read (the
// Host reports an error for it, or its volumes cannot be listed) is left
// out of the new figures; those pools are logged together, once per
// refresh. When the pools themselves cannot be read (Host fails), nothing
// is published: Collect keeps sending the previous figures, with their
// older timestamp, and the error is returned.
func (c *usageCollector) refresh(ctx context.Context) error {
	start := c.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, usageTimeout)
	defer cancel()
	host, err := c.backend.Host(ctx)
	if err != nil {
		return fmt.Errorf("read the pools: %w", err)
	}
	s := &usageSnapshot{}
	var left []string
	var errs []error
	for _, p := range host.Pools {
		if p.Error != "" {
			left = append(left, p.Name)
			errs = append(errs, fmt.Errorf("pool %q: %s", p.Name, p.Error))
			continue
		}
		list, err := c.backend.ListVolumes(ctx, p.Name)
		if err != nil {
			left = append(left, p.Name)
			errs = append(errs, fmt.Errorf("list the volumes of pool %q: %w", p.Name, err))
			continue
		}
		pu := poolUsage{name: p.Name, capacity: p.CapacityBytes, promised: p.PromisedBytes, available: p.AvailableBytes}
		for _, v := range list.Items {
			if v.SizeBytes <= 0 && v.UsedBytes == nil && v.UsedInodes == nil {
				continue
			}
			pu.volumes = append(pu.volumes, volumeUsage{name: v.Name, size: v.SizeBytes, used: v.UsedBytes, inodes: v.UsedInodes})
		}
		s.pools = append(s.pools, pu)
	}
	if len(errs) > 0 {
		klog.FromContext(ctx).Error(errors.Join(errs...), "Left the pools that cannot be read out of the usage metrics", "pools", left)
	}
	s.completed = c.clock.Now()
	s.took = s.completed.Sub(start)
	c.snapshot.Store(s)
	return nil
}
