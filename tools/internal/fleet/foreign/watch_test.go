package foreign

import (
	"strings"
	"testing"
)

// metrics is a part of an API server's /metrics: claims watched at two
// versions, pods, a claim-named resource of another group, other metrics.
const metrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="persistentvolumeclaims",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
# HELP apiserver_watch_events_sizes [BETA] Watch event size distribution in bytes
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",resource="persistentvolumeclaims",version="v1",le="1024"} 10
apiserver_watch_events_sizes_bucket{group="",resource="persistentvolumeclaims",version="v1",le="+Inf"} 12
apiserver_watch_events_sizes_sum{group="",resource="persistentvolumeclaims",version="v1"} 14336
apiserver_watch_events_sizes_count{group="",resource="persistentvolumeclaims",version="v1"} 12
apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="+Inf"} 3
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 9000
apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 3
# HELP apiserver_watch_events_total [BETA] Number of events sent in watch clients
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="persistentvolumeclaims",version="v1"} 12
apiserver_watch_events_total{group="",resource="persistentvolumeclaims",version="v2"} 1
apiserver_watch_events_total{group="",resource="pods",version="v1"} 3
apiserver_watch_events_total{group="example.com",resource="persistentvolumeclaims",version="v1"} 100
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 42.5
`

func TestParseWatchCounts(t *testing.T) {
	for _, tc := range []struct {
		name, text, group, resource string
		want                        WatchCounts
		err                         bool
	}{
		{name: "claims", text: metrics, resource: "persistentvolumeclaims", want: WatchCounts{Events: 13, Bytes: 14336}},
		{name: "pods", text: metrics, resource: "pods", want: WatchCounts{Events: 3, Bytes: 9000}},
		{name: "other group", text: metrics, group: "example.com", resource: "persistentvolumeclaims", want: WatchCounts{Events: 100}},
		{name: "none", text: "# TYPE up gauge\nup 1\n", resource: "persistentvolumeclaims"},
		{name: "untyped", text: `apiserver_watch_events_total{group="",resource="persistentvolumeclaims",version="v1"} 5` + "\n", resource: "persistentvolumeclaims", want: WatchCounts{Events: 5}},
		{name: "broken", text: "apiserver_watch_events_total{group=\"\" 5\n", resource: "persistentvolumeclaims", err: true},
	} {
		got, err := ParseWatchCounts(strings.NewReader(tc.text), tc.group, tc.resource)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestWatchCountsSub(t *testing.T) {
	a, b := &WatchCounts{Events: 10, Bytes: 100}, &WatchCounts{Events: 25, Bytes: 400}
	for _, tc := range []struct {
		name          string
		later, before *WatchCounts
		want          *WatchCounts
	}{
		{"later", b, a, &WatchCounts{Events: 15, Bytes: 300}},
		{"restarted", a, b, &WatchCounts{Events: 10, Bytes: 100}},
		{"later not read", nil, a, nil},
		{"before not read", b, nil, nil},
	} {
		got := tc.later.Sub(tc.before)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
