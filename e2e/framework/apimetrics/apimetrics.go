// Package apimetrics reads the API server's request and watch counters
// from its /metrics: the flood test counts the reviews a flood caused with
// it, the benchmarks (hostpath.dev/tools/internal/benchprovision) the API
// requests and watch events of a run.
package apimetrics

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// RequestsMetric is the API server's counter of the requests it served, by
// verb, group, version, resource, subresource, scope, component and code.
const RequestsMetric = "apiserver_request_total"

// RequestKey is a verb and a resource ("persistentvolumeclaims", or with
// its subresource, "persistentvolumeclaims/status").
type RequestKey struct {
	Verb     string
	Resource string
}

// Requests are the API server's request counts by verb and resource.
type Requests map[RequestKey]int64

// RequestCount is the number of requests of one verb on one resource.
type RequestCount struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
	Count    int64  `json:"count"`
}

// ParseAPIRequests reads the API server's /metrics (Prometheus text format,
// as `kubectl get --raw /metrics` prints it) and sums RequestsMetric by
// verb and resource over its other labels. Only that metric's lines are
// parsed; a text without it gives no requests.
func ParseAPIRequests(r io.Reader) (Requests, error) {
	return parseCounter(r, RequestsMetric, func(labels []*dto.LabelPair) (RequestKey, bool) { return requestKey(labels), true })
}

// WatchEventsMetric is the API server's counter of the watch events it
// sent, by group, version and resource, summed over every watcher.
const WatchEventsMetric = "apiserver_watch_events_total"

// WatchersMetric is the API server's gauge of the requests in progress
// that do not end (long-running), by verb and resource: its WATCH samples
// count the watchers of each resource.
const WatchersMetric = "apiserver_longrunning_requests"

// ParseWatchEvents reads the API server's /metrics as ParseAPIRequests
// does and returns WatchEventsMetric by resource (verb "event") and the
// WATCH samples of WatchersMetric by resource (verb "watchers").
func ParseWatchEvents(text []byte) (Requests, error) {
	events, err := parseCounter(bytes.NewReader(text), WatchEventsMetric, func(labels []*dto.LabelPair) (RequestKey, bool) {
		k := requestKey(labels)
		return RequestKey{Verb: "event", Resource: k.Resource}, true
	})
	if err != nil {
		return nil, err
	}
	watchers, err := parseCounter(bytes.NewReader(text), WatchersMetric, func(labels []*dto.LabelPair) (RequestKey, bool) {
		k := requestKey(labels)
		return RequestKey{Verb: "watchers", Resource: k.Resource}, k.Verb == "WATCH"
	})
	if err != nil {
		return nil, err
	}
	maps.Copy(events, watchers)
	return events, nil
}

// parseCounter sums the samples of metric in the text format r by the key
// of their labels (samples whose key says false are left out).
func parseCounter(r io.Reader, metric string, key func([]*dto.LabelPair) (RequestKey, bool)) (Requests, error) {
	families, err := MetricFamilies(r, metric)
	if err != nil {
		return nil, err
	}
	out := Requests{}
	for _, m := range families[metric].GetMetric() {
		k, ok := key(m.GetLabel())
		if !ok {
			continue
		}
		// A counter, a gauge, or untyped when the text lacks its TYPE line.
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		out[k] += int64(math.Round(v))
	}
	return out, nil
}

// MetricFamilies parses the families of the metrics names out of the
// Prometheus text format r (the API server's /metrics), reading only their
// lines: a text without them gives none.
func MetricFamilies(r io.Reader, names ...string) (map[string]*dto.MetricFamily, error) {
	var only bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if slices.ContainsFunc(names, func(name string) bool { return isMetricLine(line, name) }) {
			only.WriteString(line)
			only.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the metrics: %w", err)
	}
	// The API server's metric names are legacy Prometheus names; the
	// parser must be told which rule to check them by.
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&only)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", strings.Join(names, ", "), err)
	}
	return families, nil
}

// isMetricLine reports whether a line of the text format belongs to
// metric: a sample (of a histogram or summary, also its _bucket, _sum and
// _count), or its HELP or TYPE comment.
func isMetricLine(line, metric string) bool {
	if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
		line = rest
	} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
		line = rest
	}
	rest, ok := strings.CutPrefix(line, metric)
	if !ok {
		return false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if r, ok := strings.CutPrefix(rest, suffix); ok {
			rest = r
			break
		}
	}
	return strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")
}

func requestKey(labels []*dto.LabelPair) RequestKey {
	var k RequestKey
	var sub string
	for _, l := range labels {
		switch l.GetName() {
		case "verb":
			k.Verb = l.GetValue()
		case "resource":
			k.Resource = l.GetValue()
		case "subresource":
			sub = l.GetValue()
		}
	}
	if sub != "" {
		k.Resource += "/" + sub
	}
	return k
}

// Since is the requests from before to r, a later read of the same API
// server, most first (then by verb and resource); kinds without requests
// are left out. A count lower than before means the API server restarted in
// between: all of r's count is taken, as Prometheus' increase does.
func (r Requests) Since(before Requests) []RequestCount {
	out := []RequestCount{}
	for k, n := range r {
		if b := before[k]; n >= b {
			n -= b
		}
		if n > 0 {
			out = append(out, RequestCount{Verb: k.Verb, Resource: k.Resource, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b RequestCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Resource, b.Resource))
	})
	return out
}

// Total is the number of requests of all kinds.
func Total(rs []RequestCount) int64 {
	var n int64
	for _, r := range rs {
		n += r.Count
	}
	return n
}

// APIServerMetrics returns a function that reads the API server's /metrics
// through client (for Options.APIMetrics).
func APIServerMetrics(client kubernetes.Interface) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		return client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	}
}
