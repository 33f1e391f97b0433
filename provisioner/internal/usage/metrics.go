package usage

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports what the volumes of this instance's node use, as of the
// last refresh, with the labels of kubelet's volume statistics
// (kubelet_volume_stats_used_bytes{namespace,persistentvolumeclaim}), so
// that dashboards of claims can join them:
//
//   - hostpath_provisioner_volume_used_bytes{namespace,persistentvolumeclaim,node}:
//     the bytes the volume's quota counts;
//   - hostpath_provisioner_volume_capacity_bytes{namespace,persistentvolumeclaim,node}:
//     its enforced size, the limit.
//
// Only Bound PVs whose size their pool enforces have series (the others
// report no usage), labelled with their claim and with the instance's
// node: a multihost volume has one series per node that holds it, each
// exported by that node's instance. Cardinality: two series per enforced,
// Bound volume of the node (a node with 1000 such volumes exports 2000),
// none for other volumes. A PV's series go at the first refresh after it
// is deleted, unbound or leaves the node; while its pool cannot be listed,
// it keeps the figures of the last refresh that could.
type Metrics struct {
	used, capacity *prometheus.Desc

	mu      sync.Mutex
	samples map[string]sample
}

// sample is what one PV's series say.
type sample struct {
	namespace, claim, node string
	used, capacity         int64
}

// NewMetrics returns unregistered metrics without series; register
// Collectors.
func NewMetrics() *Metrics {
	labels := []string{"namespace", "persistentvolumeclaim", "node"}
	return &Metrics{
		used: prometheus.NewDesc("hostpath_provisioner_volume_used_bytes",
			"The bytes a volume of this node uses, as its quota counts them, at the last usage refresh (only volumes whose size the pool enforces).", labels, nil),
		capacity: prometheus.NewDesc("hostpath_provisioner_volume_capacity_bytes",
			"The enforced size, the limit, of a volume of this node (only volumes whose size the pool enforces).", labels, nil),
		samples: map[string]sample{},
	}
}

// Collectors returns the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m}
}

// Describe sends the descriptions of the two gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.used
	ch <- m.capacity
}

// Collect sends the series of the last refresh. Two PVs that name the same
// claim (a moment while the PV controller rebinds) send the series of one
// of them: the same labels twice would fail the scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[[3]string]bool, len(m.samples))
	for _, s := range m.samples {
		key := [3]string{s.namespace, s.claim, s.node}
		if seen[key] {
			continue
		}
		seen[key] = true
		ch <- prometheus.MustNewConstMetric(m.used, prometheus.GaugeValue, float64(s.used), s.namespace, s.claim, s.node)
		ch <- prometheus.MustNewConstMetric(m.capacity, prometheus.GaugeValue, float64(s.capacity), s.namespace, s.claim, s.node)
	}
}

// previous returns the sample of PV name from the last refresh. A nil
// Metrics has none.
func (m *Metrics) previous(name string) (sample, bool) {
	if m == nil {
		return sample{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.samples[name]
	return s, ok
}

// replace makes samples (by PV name) the series. A nil Metrics does
// nothing.
func (m *Metrics) replace(samples map[string]sample) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = samples
}
