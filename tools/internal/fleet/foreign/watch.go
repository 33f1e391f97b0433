package foreign

import (
	"io"

	dto "github.com/prometheus/client_model/go"

	"hostpath.dev/e2e/framework/apimetrics"
)

// The API server's counters of what it sent to watchers, by group, version
// and resource: every event to every watcher counts.
const (
	// WatchEventsMetric counts the events.
	WatchEventsMetric = apimetrics.WatchEventsMetric
	// WatchSizesMetric is a histogram of their sizes in bytes.
	WatchSizesMetric = "apiserver_watch_events_sizes"
)

// WatchCounts are the watch events the API server sent for a resource and
// their bytes, since it started.
type WatchCounts struct {
	Events float64 `json:"events"`
	Bytes  float64 `json:"bytes"`
}

// Sub is w minus before, the counts of a later read less those of an
// earlier one; nil when either is nil. A count lower than before means the
// API server restarted in between: all of w's count is taken, as
// Prometheus' increase does.
func (w *WatchCounts) Sub(before *WatchCounts) *WatchCounts {
	if w == nil || before == nil {
		return nil
	}
	d := func(now, then float64) float64 {
		if now >= then {
			return now - then
		}
		return now
	}
	return &WatchCounts{Events: d(w.Events, before.Events), Bytes: d(w.Bytes, before.Bytes)}
}

// ParseWatchCounts reads the API server's /metrics (Prometheus text format)
// and sums WatchEventsMetric and the sum of WatchSizesMetric over the
// versions of group and resource (group "" is the core API). Only those
// metrics' lines are parsed; a text without them gives zero counts.
func ParseWatchCounts(r io.Reader, group, resource string) (WatchCounts, error) {
	families, err := apimetrics.MetricFamilies(r, WatchEventsMetric, WatchSizesMetric)
	if err != nil {
		return WatchCounts{}, err
	}
	var out WatchCounts
	for _, m := range families[WatchEventsMetric].GetMetric() {
		if of(m, group, resource) {
			// A counter, or untyped when the text lacks its TYPE line.
			out.Events += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	for _, m := range families[WatchSizesMetric].GetMetric() {
		if of(m, group, resource) {
			out.Bytes += m.GetHistogram().GetSampleSum()
		}
	}
	return out, nil
}

// of reports whether m is of group and resource.
func of(m *dto.Metric, group, resource string) bool {
	var g, r string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "group":
			g = l.GetValue()
		case "resource":
			r = l.GetValue()
		}
	}
	return g == group && r == resource
}
