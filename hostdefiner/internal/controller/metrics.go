package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	hdlisters "hostpath.dev/api/generated/listers/hostpath/v1"
	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// Metrics are the host definer's Prometheus metrics.
type Metrics struct {
	syncs *prometheus.HistogramVec
	tries *prometheus.CounterVec
	// definitions is read from the lister at every scrape (SetLister).
	definitions *prometheus.Desc
	lister      hdlisters.HostDefinitionLister
}

// NewMetrics returns the metrics, to be registered (they are a
// prometheus.Collector).
func NewMetrics() *Metrics {
	return &Metrics{
		syncs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hostdefiner_sync_duration_seconds",
			Help:    "Time to sync one (node, pool) key, by result (success, error).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"result"}),
		tries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostdefiner_tries_total",
			Help: "Define and undefine tries, by action (define, undefine).",
		}, []string{"action"}),
		definitions: prometheus.NewDesc("hostdefiner_definitions",
			"HostDefinitions by phase (the elected host definer's cache).", []string{"phase"}, nil),
	}
}

// SetLister makes the definitions gauge read lister.
func (m *Metrics) SetLister(lister hdlisters.HostDefinitionLister) { m.lister = lister }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.syncs.Describe(ch)
	m.tries.Describe(ch)
	ch <- m.definitions
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.syncs.Collect(ch)
	m.tries.Collect(ch)
	counts := map[hostpathv1.Phase]int{
		hostpathv1.PhaseReady: 0, hostpathv1.PhasePendingForCreation: 0, hostpathv1.PhasePendingForDeletion: 0, hostpathv1.PhaseError: 0,
	}
	if m.lister != nil {
		defs, _ := m.lister.List(labels.Everything())
		for _, d := range defs {
			if d.Status.Phase != "" {
				counts[d.Status.Phase]++
			}
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(m.definitions, prometheus.GaugeValue, float64(n), string(phase))
	}
}

// observeSync records one sync.
func (m *Metrics) observeSync(d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	m.syncs.WithLabelValues(result).Observe(d.Seconds())
}
