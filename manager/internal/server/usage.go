package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// usageTimeout bounds one scrape's reading of the pools.
const usageTimeout = 10 * time.Second

// usageCollector exports, at each scrape, the size figures of every pool
// and of every volume with a size, read from the Backend (so a scrape costs
// a listing of each pool and, for volumes whose size is enforced, a read of
// their quota). Cardinality: the pool series have one label, pool, and the
// volume series two, pool and volume (the directory name), one series per
// volume with a size on this node: bounded by the volumes the node holds,
// and gone with the volume.
type usageCollector struct {
	backend Backend

	poolCapacity, poolPromised, poolAvailable *prometheus.Desc
	volumeSize, volumeUsed, volumeInodes      *prometheus.Desc
}

var _ prometheus.Collector = &usageCollector{}

func newUsageCollector(b Backend) *usageCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("hostpath_manager", "", name), help, labels, nil)
	}
	return &usageCollector{
		backend:       b,
		poolCapacity:  d("pool_capacity_bytes", "Size of the filesystem holding the pool.", "pool"),
		poolPromised:  d("pool_promised_bytes", "Sum of the sizes of the pool's volumes.", "pool"),
		poolAvailable: d("pool_available_bytes", "Largest size a new volume of the pool can have now (free space, capacity × overcommit ratio − promised).", "pool"),
		volumeSize:    d("volume_size_bytes", "Size of the volume (its limit where the pool enforces sizes), for volumes made with a size.", "pool", "volume"),
		volumeUsed:    d("volume_used_bytes", "Bytes the volume uses, as its quota counts them (volumes whose size is enforced).", "pool", "volume"),
		volumeInodes:  d("volume_used_inodes", "Inodes the volume uses, as its quota counts them (project quotas; btrfs counts none).", "pool", "volume"),
	}
}

// Describe sends the descriptors of the usage metrics.
func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.poolCapacity, c.poolPromised, c.poolAvailable, c.volumeSize, c.volumeUsed, c.volumeInodes} {
		ch <- d
	}
}

// Collect reads the pools and their volumes and sends their figures; a pool
// that cannot be read is logged and left out.
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), usageTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	host, err := c.backend.Host(ctx)
	if err != nil {
		logger.Error(err, "Cannot read the pools for the usage metrics")
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, p := range host.Pools {
		if p.Error != "" {
			continue
		}
		gauge(c.poolCapacity, float64(p.CapacityBytes), p.Name)
		gauge(c.poolPromised, float64(p.PromisedBytes), p.Name)
		gauge(c.poolAvailable, float64(p.AvailableBytes), p.Name)
		list, err := c.backend.ListVolumes(ctx, p.Name)
		if err != nil {
			logger.Error(err, "Cannot list the volumes for the usage metrics", "pool", p.Name)
			continue
		}
		for _, v := range list.Items {
			if v.SizeBytes > 0 {
				gauge(c.volumeSize, float64(v.SizeBytes), p.Name, v.Name)
			}
			if v.UsedBytes != nil {
				gauge(c.volumeUsed, float64(*v.UsedBytes), p.Name, v.Name)
			}
			if v.UsedInodes != nil {
				gauge(c.volumeInodes, float64(*v.UsedInodes), p.Name, v.Name)
			}
		}
	}
}
