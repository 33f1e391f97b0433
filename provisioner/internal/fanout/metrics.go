package fanout

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Operations, the values of the metrics' "operation" label.
const (
	OperationCreate = "create"
	OperationDelete = "delete"
	// OperationRetain marks a directory retained on every node that holds
	// it (a PV with reclaim policy Retain or Recycle goes away).
	OperationRetain = "retain"
	// OperationRecordPolicy records a PV's changed reclaim policy on every
	// node that holds its directory.
	OperationRecordPolicy = "record-policy"
)

// Metrics are the Prometheus metrics of fan-outs.
type Metrics struct {
	// Duration is hostpath_provisioner_fanout_duration_seconds{operation}:
	// how long whole fan-outs took.
	Duration *prometheus.HistogramVec
	// NodeResults is
	// hostpath_provisioner_fanout_node_results_total{operation,result}:
	// the per-node outcomes, result "ok" or "error".
	NodeResults *prometheus.CounterVec
}

// NewMetrics returns unregistered fan-out metrics; register Collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hostpath_provisioner_fanout_duration_seconds",
			Help:    "How long a fan-out of a volume's create, delete, retain or policy record to the nodes' managers took, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}, []string{"operation"}),
		NodeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostpath_provisioner_fanout_node_results_total",
			Help: "The per-node outcomes of fan-outs to the managers (create, delete, retain, record-policy), after retries.",
		}, []string{"operation", "result"}),
	}
}

// Collectors returns the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Duration, m.NodeResults}
}

// Observe records a fan-out of operation. A nil Metrics records nothing.
func (m *Metrics) Observe(operation string, r Results) {
	if m == nil {
		return
	}
	m.Duration.WithLabelValues(operation).Observe(r.Elapsed.Seconds())
	for _, n := range r.Nodes {
		result := "ok"
		if n.Err != nil {
			result = "error"
		}
		m.NodeResults.WithLabelValues(operation, result).Inc()
	}
}
