package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Route labels of the requests no route pattern serves.
const (
	// routeInvalid labels requests refused for an unclean path.
	routeInvalid = "invalid"
	// routeUnmatched labels requests that match no route (404, 405).
	routeUnmatched = "unmatched"
)

// metrics are the manager's HTTP metrics, counted and timed by promhttp. The
// route label is the matched pattern ("PUT /v1/pools/{pool}/volumes/{name}"),
// routeUnmatched or routeInvalid, so its cardinality is bounded.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostpath_manager",
			Name:      "http_requests_total",
			Help:      "HTTP requests served, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "hostpath_manager",
			Name:      "http_request_duration_seconds",
			Help:      "Time to serve HTTP requests, by route.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"route"}),
	}
}

// collectors returns the metrics to register.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration}
}

// instrument counts and times the requests h serves under route, and logs
// each one at level 4.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"route": route}
	return promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels),
		promhttp.InstrumentHandlerDuration(m.duration.MustCurryWith(labels), logServed(route, h)))
}

// logServed logs each request h serves at level 4. The status code is the
// one promhttp's ResponseWriter recorded for the counter (Status, 0 until a
// header is written, which means 200).
func logServed(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		logger := klog.FromContext(r.Context()).V(4)
		if !logger.Enabled() {
			return
		}
		code := http.StatusOK
		if rec, ok := w.(interface{ Status() int }); ok && rec.Status() != 0 {
			code = rec.Status()
		}
		logger.Info("Served", "method", r.Method, "path", r.URL.Path, "route", route, "code", code, "duration", time.Since(start))
	})
}
